#include "stream_arg.hpp"

#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <utility>

#include "cast_arg.hpp"
#include "errors.hpp"
#include "held_reference.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

// Holoscan 5.0's sentences for these refusals (read from its Python module), which ours begin
// with so that code matching 5.0's messages matches ours.
constexpr const char* kInvalidStream =
    "Invalid stream, valid stream should be -1 (non-blocking), 1 (legacy default stream), 2 "
    "(per-thread default stream), or a positive integer (stream pointer)";

struct RawStream {
  std::intptr_t value = 0;
  bool from_object = false;  // a stream object, whose 0 names the legacy default stream
};

// A handle as an integer; one past intptr_t is no stream (refused as a negative one is).
std::intptr_t stream_integer(nb::handle value, const char* what) {
  if (PyBool_Check(value.ptr())) {
    throw nb::type_error((std::string(what) + " must be an integer, not a bool").c_str());
  }
  const std::optional<std::intptr_t> handle = integer_argument<std::intptr_t>(value, what);
  if (!handle) {
    raise_invalid_argument("stream " + display_text(value) + " is not a stream");
  }
  return *handle;
}

// The CUDA stream protocol: `__cuda_stream__()` returns (version, handle), version 0. Any
// sequence of two items is read, as Holoscan 5.0 reads it (PySequence_Size, PySequence_GetItem);
// text is not a pair of integers.
std::intptr_t cuda_stream_protocol(nb::handle method) {
  // Python code, run by this thread (cuda.core's streams): see running_python. A C call, so that
  // no C++ frame with a destructor lies between it and running_python.
  if (!PyCallable_Check(method.ptr())) {
    throw nb::type_error(
        ("Invalid stream type: __cuda_stream__ must be callable, not " + type_text(method))
            .c_str());
  }
  // What it returned is dropped the same way (held_reference.hpp).
  const HeldReference result(running_python([&] { return PyObject_CallNoArgs(method.ptr()); }));
  if (!result.is_valid()) {
    throw nb::python_error();
  }
  const auto pair = sequence_pair(nb::handle(result.get()));
  if (!pair) {
    throw nb::type_error(
        "__cuda_stream__ must return a sequence with 2 elements: (version, stream pointer)");
  }
  const nb::handle version = pair->first.handle();
  if (integer_argument<long>(version, "__cuda_stream__()[0]") != 0) {
    raise_invalid_argument(std::string("__cuda_stream__ protocol version must be 0, not ") +
                           display_text(version));
  }
  const std::intptr_t handle = stream_integer(pair->second.handle(), "__cuda_stream__()[1]");
  if (handle < 0) {
    raise_invalid_argument("__cuda_stream__ stream pointer must be non-negative, not " +
                           std::to_string(handle));
  }
  return handle;
}

RawStream raw_stream(nb::handle stream) {
  if (PyBool_Check(stream.ptr())) {
    throw nb::type_error("stream must be an integer or a stream object, not a bool");
  }
  if (PyLong_Check(stream.ptr())) {
    return {stream_integer(stream, "stream"), false};
  }
  // A stream object's attributes may be Python code (a proxy, a property): attribute_if_any
  // lets what they raise through.
  if (const HeldReference method = attribute_if_any(stream, "__cuda_stream__"); method.is_valid()) {
    return {cuda_stream_protocol(method.handle()), true};
  }
  // torch's and CuPy's stream objects: the attribute, and its name in an error.
  constexpr std::pair<const char*, const char*> kHandles[] = {{"cuda_stream", "stream.cuda_stream"},
                                                              {"ptr", "stream.ptr"}};
  for (const auto& [attribute, name] : kHandles) {
    if (const HeldReference handle = attribute_if_any(stream, attribute); handle.is_valid()) {
      return {stream_integer(handle.handle(), name), true};
    }
  }
  throw nb::type_error(
      ("Invalid stream type: should be int, None, or object with callable __cuda_stream__ (or "
       "torch's `cuda_stream`, CuPy's `ptr`), not " +
       type_text(stream))
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
  if (raw.from_object && raw.value < 0) {
    // -1 is the protocol's integer for "no synchronization", not a handle a stream object has.
    raise_invalid_argument("a stream object's handle " + std::to_string(raw.value) +
                           " is not a stream");
  }
  if (raw.value == -1) {
    return {ProtocolStream::Kind::kNoSync, -1, nullptr};
  }
  if (raw.value == 0) {
    raise_invalid_argument(std::string(kInvalidStream) +
                           ": stream=0 is ambiguous in the DLPack protocol (1 is the legacy "
                           "default stream, 2 the per-thread default stream)");
  }
  if (raw.value < -1) {
    raise_invalid_argument(std::string(kInvalidStream) + ": stream " + std::to_string(raw.value) +
                           " is not a stream");
  }
  return {ProtocolStream::Kind::kStream, raw.value, reinterpret_cast<cudaStream_t>(raw.value),
          raw.from_object ? stream.ptr() : nullptr};
}

cudaStream_t parse_stream(nb::handle stream) {
  if (stream.is_none()) {
    return nullptr;
  }
  const RawStream raw = raw_stream(stream);
  if (raw.value < 0) {
    raise_invalid_argument("stream " + std::to_string(raw.value) + " is not a stream");
  }
  return reinterpret_cast<cudaStream_t>(raw.value);
}

}  // namespace holoscan::python
