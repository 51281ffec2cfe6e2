// A copy's export wraps the library's own (which owns the shape, the strides and a reference to
// the memory) and adds one step to its deleter: a deallocation point on the consumer's stream.
// The stream's Python owner, where one is known (the stream object the consumer passed, or CuPy's
// current stream with that handle), is kept until then: CuPy destroys a stream with its last
// reference, and a destroyed handle given to CUDA is undefined behaviour (it crashed).
#include "copy_export.hpp"

#include <atomic>
#include <cstddef>
#include <new>

#include "devices.hpp"
#include "dlpack/export_owner.hpp"
#include "dlpack/kept_blocks.hpp"
#include "errors.hpp"
#include "holoscan/cuda_stream_sync.hpp"
#include "protocol_streams.hpp"
#include "python_release.hpp"
#include "stream_owner.hpp"
#include "without_gil.hpp"

namespace holoscan::python {
namespace {

// Without a point on the consumer's stream the copy's memory would go once the copy was made,
// under the consumer's kernels. Where none can be recorded (no event, no room for it) the host
// waits for the consumer instead; a stream that refuses that too (capturing) leaves a point on
// the legacy stream.
void retire_after_consumer(Tensor& copy, cudaStream_t consumer) noexcept {
  // The default streams below (and kLegacyStream) are the copy's device's.
  const holoscan::detail::DefaultStreamDevice scope(copy.device(), consumer);
  try {
    if (copy.set_deallocation_stream(consumer) ||
        synchronize_cuda_stream_for_host(consumer).has_value()) {
      return;
    }
  } catch (...) {  // out of memory for the point or for the wait's error: the legacy point below
  }
  try {
    (void)copy.set_deallocation_stream(kLegacyStream);
  } catch (...) {  // NOLINT(bugprone-empty-catch): still freed after the copy's own points
  }
}

// Its memory stays a RetiringExport's for good (kept_blocks.hpp), as the library's export owners'
// does: a second call of the deleter (a consumer's bug) reads the cleared view, never freed
// memory, and is counted and ignored as the library's is.
template <class Managed>
struct RetiringExport : PythonRelease {
  // What the consumer gets: the inner export's fields, our deleter. Left as it is when a kept
  // block is taken (no value-initialization): a stale pointer of its previous life may read its
  // deleter and manager_ctx at any time, and must find ours and null until the export is whole.
  Managed view;
  Managed* inner = nullptr;  // the library's export
  Tensor copy;               // the copy, to record the point on
  cudaStream_t consumer = nullptr;
  PyObject* stream_owner = nullptr;  // keeps `consumer` alive (a reference), or null
  std::atomic<bool> imported{false};  // an import took the export (take_copy_export)

  static void* operator new(std::size_t, const std::nothrow_t&) noexcept {
    return holoscan::detail::KeptBlocks<RetiringExport>::take();
  }
  static void operator delete(void* block) noexcept {
    holoscan::detail::KeptBlocks<RetiringExport>::give(block);
  }

  static void deleter(Managed* self) noexcept {
    auto* owner = static_cast<RetiringExport*>(holoscan::detail::take_export_owner(*self));
    if (owner == nullptr) {
      return;  // a second call
    }
    retire_after_consumer(owner->copy, owner->consumer);
    owner->inner->deleter(owner->inner);
    owner->copy = Tensor();
    if (owner->stream_owner == nullptr) {
      delete owner;
      return;
    }
    // The reference goes under the GIL, which this thread may not hold (any thread lets go).
    owner->run = &drop_stream_owner;
    release_with_python(owner);
  }

  static void drop_stream_owner(PythonRelease* node, bool python_alive) noexcept {
    auto* owner = static_cast<RetiringExport*>(node);
    if (python_alive) {
      running_python([&] { Py_DECREF(owner->stream_owner); });  // see running_python
    }
    delete owner;
  }
};

// The owner of a copy's export, live (null once its deleter ran), when `managed` is one.
template <class Managed>
RetiringExport<Managed>* copy_export_owner(Managed* managed, bool& is_one) noexcept {
  is_one =
      __atomic_load_n(&managed->deleter, __ATOMIC_RELAXED) == &RetiringExport<Managed>::deleter;
  return is_one ? static_cast<RetiringExport<Managed>*>(
                      __atomic_load_n(&managed->manager_ctx, __ATOMIC_ACQUIRE))
                : nullptr;
}

template <class Managed>
CopyExportTake take(Managed* managed) noexcept {
  bool is_one = false;
  RetiringExport<Managed>* owner = copy_export_owner(managed, is_one);
  if (!is_one) {
    return CopyExportTake::kNotOne;
  }
  if (owner == nullptr) {
    return CopyExportTake::kSpent;
  }
  return owner->imported.exchange(true, std::memory_order_acq_rel) ? CopyExportTake::kTakenBefore
                                                                   : CopyExportTake::kTaken;
}

template <class Managed>
void untake(Managed* managed) noexcept {
  bool is_one = false;
  if (RetiringExport<Managed>* owner = copy_export_owner(managed, is_one)) {
    owner->imported.store(false, std::memory_order_release);
  }
}

cudaStream_t retiring_stream(const ProtocolStream& consumer) noexcept {
  const bool explicit_stream = consumer.kind == ProtocolStream::Kind::kStream &&
                               consumer.handle != kLegacyStream &&
                               consumer.handle != kPerThreadStream;
  return explicit_stream ? consumer.handle : kLegacyStream;
}

template <class Managed>
expected<Managed*, Error> wrap(expected<Managed*, Error> inner, const Tensor& copy,
                               const ProtocolStream& consumer) {
  if (!inner || !cuda_ordered(copy.device().device_type)) {
    return inner;  // host memory: its consumer reads it on the host, nothing to retire
  }
  const cudaStream_t retiring = retiring_stream(consumer);
  PyObject* stream_owner = nullptr;  // a new reference, or null
  if (retiring != kLegacyStream) {   // called under the GIL
    if (consumer.object != nullptr) {
      Py_INCREF(consumer.object);
      stream_owner = consumer.object;
    } else if (stream_owner = find_stream_owner(retiring);
               stream_owner == nullptr && PyErr_Occurred() != nullptr) {
      // Interrupted (KeyboardInterrupt) or out of memory while looking: raised, not lost, and
      // the export given back first (its deleter may run Python code: the error kept aside).
      HeldReference raised = take_raised_exception();
      (*inner)->deleter(*inner);
      restore_raised_exception(std::move(raised));
      throw nanobind::python_error();
    }
  }
  auto* owner = new (std::nothrow) RetiringExport<Managed>;  // no "()": `view` stays as it was
  if (owner == nullptr) {
    (*inner)->deleter(*inner);
    running_python([&] {  // possibly the last reference: its finalizer may be Python code
      Py_XDECREF(stream_owner);
      return 0;
    });
    return make_unexpected(ErrorCode::kResourceExhausted, "__dlpack__: out of host memory");
  }
  owner->inner = *inner;
  owner->copy = copy;
  owner->consumer = retiring;
  owner->stream_owner = stream_owner;
  owner->imported.store(false, std::memory_order_relaxed);  // published with the owner below
  // The inner export's fields, without ever showing its deleter or manager_ctx (see `view`):
  // ours, null, then the owner last, once the export is whole.
  Managed fields = **inner;
  fields.deleter = &RetiringExport<Managed>::deleter;
  fields.manager_ctx = nullptr;
  owner->view = fields;
  holoscan::detail::publish_export_owner(owner->view, &RetiringExport<Managed>::deleter, owner);
  return &owner->view;
}

}  // namespace

CopyExportTake take_copy_export(DLManagedTensorVersioned* managed) noexcept {
  return take(managed);
}

CopyExportTake take_copy_export(DLManagedTensor* managed) noexcept { return take(managed); }

bool copy_export_consumed(DLManagedTensorVersioned* managed) noexcept {
  bool is_one = false;
  RetiringExport<DLManagedTensorVersioned>* owner = copy_export_owner(managed, is_one);
  return is_one && (owner == nullptr || owner->imported.load(std::memory_order_acquire));
}

void untake_copy_export(DLManagedTensorVersioned* managed) noexcept { untake(managed); }

void untake_copy_export(DLManagedTensor* managed) noexcept { untake(managed); }

expected<DLManagedTensorVersioned*, Error> export_copy_versioned(const Tensor& copy,
                                                                 const ProtocolStream& consumer) {
  return wrap(copy.to_dlpack_versioned(), copy, consumer);
}

expected<DLManagedTensor*, Error> export_copy_legacy(const Tensor& copy,
                                                     const ProtocolStream& consumer) {
  return wrap(copy.to_dlpack(), copy, consumer);
}

}  // namespace holoscan::python
