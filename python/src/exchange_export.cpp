// Tensor.__dlpack_c_exchange_api__: DLPack 1.3's C exchange API with holoscan_dlpack.Tensor as
// the producer, as Holoscan 5.0's Tensor publishes one. A C consumer (tvm-ffi, a kernel library)
// converts Tensors without a Python call. The converters order nothing themselves ("no_sync"):
// the consumer runs on the producer's current work stream, which we report as the legacy default
// stream, so every export also orders that stream after the tensor's readiness point (one event
// wait on the GPU; once the export succeeded), as __cuda_array_interface__ does.
#include <Python.h>

#include <exception>
#include <string>

#include <holoscan/dlpack_utils.hpp>
#include <holoscan/tensor.hpp>

#include "bindings.hpp"
#include "copy_export.hpp"
#include "devices.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "dlpack/own_export.hpp"
#include "errors.hpp"
#include "exports.hpp"
#include "imports.hpp"
#include "protocol_streams.hpp"
#include "stream_arg.hpp"
#include "without_gil.hpp"

namespace nb = nanobind;

namespace holoscan::python {

#if DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION >= 3

namespace {

// Converters are C functions called with the GIL held: a failure is a Python exception and -1.
int fail(PyObject* type, const char* message) noexcept {
  set_error_text(type, message);
  return -1;
}

int fail_from_current_exception() noexcept {
  try {
    throw;
  } catch (nb::python_error& error) {
    error.restore();
  } catch (const nb::builtin_exception& error) {
    set_error_text(PyExc_BufferError, error.what());
  } catch (const std::exception& error) {
    set_error_text(PyExc_BufferError, error.what());
  } catch (...) {
    PyErr_SetString(PyExc_BufferError, "holoscan_dlpack: unknown failure in the C exchange API");
  }
  return -1;
}

Tensor* tensor_of(void* py_object) {
  nb::handle object(static_cast<PyObject*>(py_object));
  if (!nb::isinstance<Tensor>(object) || !nb::inst_ready(object)) {
    return nullptr;  // not a Tensor, or one whose construction never ran (Tensor.__new__)
  }
  return nb::inst_ptr<Tensor>(object);
}

// Makes the legacy default stream (our reported work stream) wait for the readiness point. Host
// memory (CPU, pinned) is read by a host consumer, which waits on no stream: the host waits for
// the readiness point instead, as `__dlpack__` does for such a tensor.
void order_work_stream(Tensor& tensor) {
  if (host_device(tensor.device().device_type)) {
    wait_ready_on_host(tensor);
    return;
  }
  if (!cuda_ordered(tensor.device().device_type) || !tensor.has_readiness_stream_contract() ||
      ready_on_legacy_default(tensor.readiness_stream(), kLegacyStream)) {
    return;
  }
  if (auto ordered = order_protocol_consumer(tensor, kLegacyStream); !ordered) {
    raise_error(ordered.error(), Raise::kBuffer);
  }
}

// A C consumer's null output pointer is refused with Holoscan 5.0's sentences, not written.
int managed_from_tensor(void* py_object, DLManagedTensorVersioned** out) {
  if (out == nullptr) {
    return fail(PyExc_BufferError, "DLPack output pointer must not be null");
  }
  *out = nullptr;
  if (py_object == nullptr) {  // a C consumer's misuse: its type cannot even be read
    return fail(PyExc_BufferError, "Python object must not be null");
  }
  try {
    Tensor* tensor = tensor_of(py_object);
    if (tensor == nullptr) {
      return fail(PyExc_TypeError, "expected a holoscan_dlpack.Tensor object");
    }
    // Exported first, ordered second: a refused export queues no wait; a failed ordering gives
    // the export back before it raises.
    auto managed = tensor->to_dlpack_versioned();
    if (!managed) {
      raise_error(managed.error(), Raise::kBuffer);
    }
    try {
      order_work_stream(*tensor);
    } catch (...) {
      (*managed)->deleter(*managed);
      throw;
    }
    *out = *managed;
    return 0;
  } catch (...) {
    return fail_from_current_exception();
  }
}

// A borrowed view: unversioned, so it cannot carry read-only authority; refused then (5.0 too).
// Nor can it say IS_SUBBYTE_TYPE_PADDED: its consumer would read padded elements as packed ones,
// so such a tensor is refused as by the legacy export (Tensor::to_dlpack).
int view_of_tensor(void* py_object, DLTensor* out) {
  if (out == nullptr) {
    return fail(PyExc_BufferError, "DLPack output tensor must not be null");
  }
  if (py_object == nullptr) {
    return fail(PyExc_BufferError, "Python object must not be null");
  }
  try {
    Tensor* tensor = tensor_of(py_object);
    if (tensor == nullptr) {
      return fail(PyExc_TypeError, "expected a holoscan_dlpack.Tensor object");
    }
    if (tensor->is_read_only()) {
      return fail(PyExc_BufferError,
                  "an unversioned DLTensor view cannot carry a read-only Tensor's authority");
    }
    if ((tensor->flags() & detail::kSubBytePaddedFlag) != 0 &&
        detail::is_packed_sub_byte(tensor->dtype(), 0)) {
      return fail(PyExc_BufferError,
                  "an unversioned DLTensor view cannot say that the tensor's sub-byte elements "
                  "are padded (IS_SUBBYTE_TYPE_PADDED): use managed_tensor_from_py_object_no_sync");
    }
    order_work_stream(*tensor);
    *out = tensor->dl_tensor();  // shape and strides live in the context, as long as the object
    return 0;
  } catch (...) {
    return fail_from_current_exception();
  }
}

// The tensor is handed over ("stolen"): until a Tensor owns it, every refusal frees it, once.
int tensor_from_managed(DLManagedTensorVersioned* managed, void** out) {
  const auto refuse = [managed](const char* message) {
    free_with_producer_deleter(managed);
    return fail(PyExc_BufferError, message);
  };
  if (out == nullptr) {  // 5.0 checks it first, and frees the tensor all the same
    return refuse("Python object output pointer must not be null");
  }
  *out = nullptr;
  if (managed == nullptr) {
    return fail(PyExc_BufferError, "DLPack tensor must not be null");
  }
  if (managed->version.major != HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR) {
    return refuse("DLPack tensor of another major version");
  }
  expected<Tensor, Error> tensor;
  try {
    tensor = adopt_versioned(managed, nb::handle());
  } catch (...) {  // out of memory before anything was lent: still the caller's, so ours
    return refuse("holoscan_dlpack: out of memory importing a DLPack tensor");
  }
  if (!tensor) {
    // This library's export that another import took, or whose deleter ran, was never the
    // caller's to hand over: refused without its deleter, which would free the memory under the
    // import that owns it.
    const bool owned_elsewhere =
        holoscan::detail::own_export_consumed(managed) || copy_export_consumed(managed);
    const auto refuse_given = [&](const char* text) {
      return owned_elsewhere ? fail(PyExc_BufferError, text) : refuse(text);
    };
    // Called from C: nothing may throw out of here, not even the message's allocation.
    std::string message;
    try {
      message = to_string(tensor.error());
    } catch (...) {
      return refuse_given("holoscan_dlpack: out of memory describing a refused DLPack tensor");
    }
    return refuse_given(message.c_str());
  }
  try {
    *out = nb::cast(std::move(*tensor)).release().ptr();  // a failure drops the Tensor: freed
    return 0;
  } catch (...) {
    return fail_from_current_exception();
  }
}

int refuse_allocation(DLTensor*, DLManagedTensorVersioned** out, void* error_ctx,
                      void (*set_error)(void*, const char*, const char*)) {
  if (out != nullptr) {
    *out = nullptr;
  }
  if (set_error != nullptr) {
    set_error(error_ctx, "NotImplementedError",
              "Holoscan Tensor does not support DLPack allocation (holoscan_dlpack allocates "
              "through TensorPool)");
  }
  return -1;
}

int current_work_stream(DLDeviceType, std::int32_t, void** out) {
  if (out == nullptr) {
    return fail(PyExc_BufferError, "DLPack stream output pointer must not be null");
  }
  *out = nullptr;  // the legacy default stream, for every device
  return 0;
}

const DLPackExchangeAPI* exchange_api() {
  static const DLPackExchangeAPI api = [] {
    DLPackExchangeAPI table{};
    table.header.version = DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    table.managed_tensor_allocator = &refuse_allocation;
    table.managed_tensor_from_py_object_no_sync = &managed_from_tensor;
    table.managed_tensor_to_py_object_no_sync = &tensor_from_managed;
    table.dltensor_from_py_object_no_sync = &view_of_tensor;
    table.current_work_stream = &current_work_stream;
    return table;
  }();
  return &api;
}

}  // namespace

void bind_exchange_export(nb::class_<Tensor>& tensor_type) {
  tensor_type.attr("__dlpack_c_exchange_api__") =
      nb::capsule(exchange_api(), "dlpack_exchange_api");
}

#else

void bind_exchange_export(nb::class_<Tensor>&) {}  // a dlpack.h without the C exchange API

#endif

}  // namespace holoscan::python
