#include <Python.h>

#include <cstdint>
#include <string>

#include "devices.hpp"
#include "dtype.hpp"
#include "errors.hpp"
#include "exports.hpp"
#include "stream_arg.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

nb::dict interface_dict(const Tensor& tensor) {
  auto typestr = numpy_dtype(tensor.dtype());
  if (!typestr) {
    raise_error(typestr.error(), Raise::kBuffer);
  }
  nb::dict dict;
  const std::vector<std::int64_t> shape = tensor.shape();
  nb::list extents;
  for (std::int64_t extent : shape) {
    extents.append(extent);
  }
  dict["shape"] = nb::tuple(extents);
  dict["typestr"] = *typestr;
  dict["data"] =
      nb::make_tuple(reinterpret_cast<std::uintptr_t>(tensor.data()), tensor.is_read_only());
  dict["version"] = 3;
  if (tensor.is_contiguous()) {
    dict["strides"] = nb::none();
  } else {
    nb::list strides;
    for (std::int64_t stride : tensor.strides()) {
      strides.append(stride);
    }
    dict["strides"] = nb::tuple(strides);
  }
  return dict;
}

}  // namespace

nb::dict cuda_array_interface(Tensor& tensor) {
  if (!cuda_array_device(tensor.device().device_type)) {
    throw nb::attribute_error(
        "__cuda_array_interface__ exists only for CUDA device and managed tensors");
  }
  nb::dict dict = interface_dict(tensor);
  // The consumer synchronizes with the stream named here before it reads.
  nb::object stream = nb::none();
  if (tensor.has_readiness_stream_contract()) {
    cudaStream_t readiness = tensor.readiness_stream();
    if (readiness == kPerThreadStream) {
      // "2" would name the consumer thread's own per-thread stream: hand over on legacy instead.
      if (auto ordered = tensor.synchronize_for_consumer_stream(kLegacyStream); !ordered) {
        raise_error(ordered.error());
      }
      readiness = kLegacyStream;
    }
    stream = stream_to_python(readiness);
  }
  dict["stream"] = stream;
  return dict;
}

nb::dict array_interface(Tensor& tensor) {
  if (!host_device(tensor.device().device_type)) {
    throw nb::attribute_error(
        "__array_interface__ exists only for host tensors; use DLPack or "
        "__cuda_array_interface__ for device tensors");
  }
  // The dict carries no stream: the host waits here for the producer's readiness point.
  if (tensor.has_readiness_stream_contract()) {
    expected<void, Error> ready;
    {
      nb::gil_scoped_release unlocked;
      ready = tensor.synchronize_for_host();
    }
    if (!ready) {
      raise_error(ready.error());
    }
  }
  return interface_dict(tensor);
}

}  // namespace holoscan::python
