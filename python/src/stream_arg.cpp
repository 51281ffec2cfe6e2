#include "stream_arg.hpp"

#include <string>

namespace nb = nanobind;

namespace holoscan::python {
namespace {

struct RawStream {
  std::intptr_t value = 0;
  bool from_object = false;  // a stream object, whose 0 names the legacy default stream
};

RawStream raw_stream(nb::handle stream) {
  if (PyBool_Check(stream.ptr())) {
    throw nb::type_error("stream must be an integer or a stream object, not a bool");
  }
  if (PyLong_Check(stream.ptr())) {
    return {nb::cast<std::intptr_t>(stream), false};
  }
  for (const char* attribute : {"cuda_stream", "ptr"}) {
    if (nb::hasattr(stream, attribute)) {
      return {nb::cast<std::intptr_t>(stream.attr(attribute)), true};
    }
  }
  throw nb::type_error(
      ("stream must be None, an integer, or an object with `cuda_stream` (torch) or `ptr` "
       "(CuPy), not " +
       std::string(nb::type_name(stream.type()).c_str()))
          .c_str());
}

}  // namespace

ProtocolStream parse_protocol_stream(nb::handle stream) {
  if (stream.is_none()) {
    return {};
  }
  RawStream raw = raw_stream(stream);
  if (raw.from_object && raw.value == 0) {
    raw.value = 1;
  }
  if (raw.value == -1) {
    return {ProtocolStream::Kind::kNoSync, -1, nullptr};
  }
  if (raw.value == 0) {
    throw nb::value_error(
        "stream=0 is ambiguous in the DLPack protocol: pass 1 for the legacy default stream or 2 "
        "for the per-thread default stream");
  }
  if (raw.value < -1) {
    throw nb::value_error(("stream " + std::to_string(raw.value) + " is not a stream").c_str());
  }
  return {ProtocolStream::Kind::kStream, raw.value, reinterpret_cast<cudaStream_t>(raw.value)};
}

cudaStream_t parse_stream(nb::handle stream) {
  if (stream.is_none()) {
    return nullptr;
  }
  const RawStream raw = raw_stream(stream);
  if (raw.value < 0) {
    throw nb::value_error(("stream " + std::to_string(raw.value) + " is not a stream").c_str());
  }
  return reinterpret_cast<cudaStream_t>(raw.value);
}

nb::object stream_to_python(cudaStream_t stream) {
  const auto value = reinterpret_cast<std::intptr_t>(stream);
  return nb::int_(value == 0 ? 1 : value);
}

}  // namespace holoscan::python
