#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>

#include <holoscan/dl_managed_memory_buffer.hpp>

#include "devices.hpp"
#include "dtype.hpp"
#include "errors.hpp"
#include "exports.hpp"
#include "protocol_streams.hpp"
#include "stream_arg.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {
namespace {

// Whether the DLPack tensor this Tensor imported came without strides (compact, as DLPack before
// 1.2 allowed): Holoscan 5.0's dicts then give None, as the producer did. The import fills them in.
bool producer_gave_no_strides(const Tensor& tensor) noexcept {
  const std::shared_ptr<DLManagedTensorContext>& context = tensor.dl_ctx();
  if (context == nullptr || !tensor.is_contiguous()) {
    return false;
  }
  TensorMemoryReference* reference = context->memory_reference.get();
  if (const auto* versioned = dynamic_cast<const DLManagedMemoryBufferVersioned*>(reference);
      versioned != nullptr && versioned->managed_tensor() != nullptr) {
    return versioned->managed_tensor()->dl_tensor.strides == nullptr;
  }
  if (const auto* legacy = dynamic_cast<const DLManagedMemoryBuffer*>(reference);
      legacy != nullptr && legacy->managed_tensor() != nullptr) {
    return legacy->managed_tensor()->dl_tensor.strides == nullptr;
  }
  return false;
}

nb::dict interface_dict(const Tensor& tensor) {
  const DLDataType dtype = tensor.dtype();
  if (dtype.lanes != 1) {
    // numpy_dtype names one lane (Holoscan 5.0's rule), but the dict's shape counts elements: a
    // consumer would read one lane of each.
    raise_error(Error{ErrorCode::kInvalidArgument,
                      "array interface: DLDataType{code " + std::to_string(dtype.code) + ", bits " +
                          std::to_string(dtype.bits) + ", lanes " + std::to_string(dtype.lanes) +
                          "} has more than one lane, which a NumPy type string (numpy_dtype) "
                          "cannot describe",
                      0},
                Raise::kBuffer);
  }
  auto typestr = numpy_dtype(dtype);
  if (!typestr) {
    raise_error(typestr.error(), Raise::kBuffer);
  }
  // Holoscan 5.0's keys, in its order. Its strides are the byte strides whenever the DLPack view
  // has strides (every producer of DLPack 1.2 or later gives them), contiguous or not, so that a
  // consumer sees the strides the producer gave (NumPy keeps them on its view); None for a 0-d
  // tensor or one whose producer gave none.
  nb::dict dict;
  nb::list extents;
  for (std::int64_t extent : tensor.shape()) {
    extents.append(extent);
  }
  dict["shape"] = nb::tuple(extents);
  dict["typestr"] = *typestr;
  dict["data"] =
      nb::make_tuple(reinterpret_cast<std::uintptr_t>(tensor.data()), tensor.is_read_only());
  dict["version"] = 3;
  const DLTensor& view = tensor.dl_tensor();
  if (view.ndim > 0 && view.strides != nullptr && !producer_gave_no_strides(tensor)) {
    nb::list strides;
    for (std::int64_t stride : tensor.strides()) {
      strides.append(stride);
    }
    dict["strides"] = nb::tuple(strides);
  } else {
    dict["strides"] = nb::none();
  }
  // The layout's description too, as NumPy's own dicts carry it: one unnamed field of the whole
  // type.
  nb::list descr;
  descr.append(nb::make_tuple("", *typestr));
  dict["descr"] = descr;
  return dict;
}

}  // namespace

nb::dict cuda_array_interface(Tensor& tensor) {
  if (!cuda_array_device(tensor.device().device_type)) {
    throw nb::attribute_error(
        "__cuda_array_interface__ exists only for CUDA device and managed tensors");
  }
  nb::dict dict = interface_dict(tensor);
  if (tensor.size() == 0) {
    // The CUDA Array Interface asks for 0 there (a strict consumer refuses any other address),
    // where NumPy's array interface carries the address as it is.
    dict["data"] = nb::make_tuple(std::uintptr_t{0}, tensor.is_read_only());
  }
  // The consumer waits on the stream named here before it reads. A handle of ours would have to
  // outlive the consumer's wait, and "2" would name the consumer thread's own per-thread stream:
  // the legacy default stream is the one every thread can wait on, so readiness is handed over
  // to it (one event wait on the GPU, none when readiness was recorded there).
  if (tensor.has_readiness_stream_contract() &&
      !ready_on_legacy_default(tensor.readiness_stream(), kLegacyStream)) {
    if (auto ordered = order_protocol_consumer(tensor, kLegacyStream); !ordered) {
      raise_error(ordered.error());
    }
  }
  // Named whether or not there is a readiness point, as Holoscan 5.0 does: without one the
  // consumer still orders itself after the legacy default stream's work, never less than None.
  dict["stream"] = 1;
  dict["mask"] = nb::none();  // every element is valid (Holoscan 5.0 writes the key)
  return dict;
}

void wait_ready_on_host(Tensor& tensor) {
  if (!tensor.has_readiness_stream_contract()) {
    return;  // written on the host, or no stream recorded: nothing to wait for
  }
  const expected<void, Error> ready = without_gil([&] { return tensor.synchronize_for_host(); });
  if (!ready) {
    raise_error(ready.error());
  }
}

nb::dict array_interface(Tensor& tensor) {
  if (!host_device(tensor.device().device_type)) {
    throw nb::attribute_error(
        "__array_interface__ exists only for host tensors; use DLPack or "
        "__cuda_array_interface__ for device tensors");
  }
  wait_ready_on_host(tensor);  // the dict carries no stream
  return interface_dict(tensor);
}

}  // namespace holoscan::python
