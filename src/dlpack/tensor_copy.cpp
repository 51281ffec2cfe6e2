// Tensor::copy, copy_to, copy_to_host and copy_to_host_async: owning compact copies, ordered after
// the source's readiness, with the source kept alive until the copy has read it.
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "dlpack/context_access.hpp"
#include "dlpack/copy_memory.hpp"
#include "dlpack/copy_plan.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "dlpack/tensor_view.hpp"
#include "dlpack/without_throwing.hpp"
#include "holoscan/tensor.hpp"
#include "holoscan/tensor_pool.hpp"
#include "stream/stream_point.hpp"

namespace holoscan {
namespace {

// The plan of a copy of `source`, after the checks every copy makes.
expected<detail::CopyPlan, Error> plan_copy(const Tensor& source, const char* who) {
  if (!source) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(who) + ": Tensor copy source is empty");
  }
  const DLTensor& view = source.dl_tensor();
  if (auto layout = detail::validate_dl_tensor(view, source.flags(), who); !layout) {
    return forward_error(std::move(layout));
  }
  if (!detail::copyable_device_type(view.device.device_type)) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(who) + ": Tensor copy source device is unsupported (" +
                               std::to_string(view.device.device_type) + ")");
  }
  return detail::CopyPlan::of(view, source.flags(), who);
}

// The copy's error when a caller's memory reference threw from `hook` (its hooks are not
// noexcept).
tl::unexpected<Error> hook_threw(const char* hook) {
  return make_unexpected(
      ErrorCode::kFailure,
      std::string("Tensor copy: the source's memory reference threw from ") + hook);
}

// A caller's memory reference may throw from its readiness hooks: the copy's memory, taken from
// the stream already, must then go the way of any failure (after what was queued, see
// release_after_queued), so the throw becomes the copy's error.
template <class Wait>
expected<void, Error> wait_for_source(const Tensor& source, const char* hook, Wait&& wait) {
  if (!source.has_readiness_stream_contract()) {
    return {};  // nothing to wait for
  }
  try {
    return wait();
  } catch (...) {
    return hook_threw(hook);
  }
}

// The host waits until the source is ready.
expected<void, Error> wait_on_host(const Tensor& source) {
  return wait_for_source(source, "synchronize_for_host",
                         [&] { return source.synchronize_for_host(); });
}

// `stream` waits until the source is ready.
expected<void, Error> wait_on_stream(const Tensor& source, cudaStream_t stream) {
  return wait_for_source(source, "synchronize_for_consumer",
                         [&] { return source.synchronize_for_consumer_stream(stream); });
}

expected<void, Error> copy_on_host(const detail::CopyPlan& plan, const Tensor& source,
                                   void* destination) {
  const auto* from = static_cast<const char*>(source.data());
  auto* to = static_cast<char*>(destination);
  return plan.for_each_piece([&](const detail::CopyPiece& piece) -> expected<void, Error> {
    for (std::size_t row = 0; row < piece.height; ++row) {
      std::memcpy(to + piece.destination_offset + row * piece.destination_pitch,
                  from + piece.source_offset + row * piece.source_pitch, piece.width);
    }
    return {};
  });
}

// CUDA documents that cudaMemcpy2DAsync refuses a pitch past "the maximum allowed", and the
// device's memPitch (cudaDevAttrMaxPitch) is 2^31 - 1 bytes. The H200's driver (CUDA 13) accepts
// larger pitches (asked by tests/gpu/tensor_gpu_test.cpp), but a driver that keeps to the
// documented limit would fail the copy, so rows further apart than that (a slice of a larger
// tensor, rows of 2 GiB or more) are copied one by one. Such rows fill 2 GiB of memory each: a
// piece has few of them.
constexpr std::size_t kMaxCopyPitch = 2147483647;

bool rows_one_by_one(const detail::CopyPiece& piece) noexcept {
  return piece.source_pitch > kMaxCopyPitch || piece.destination_pitch > kMaxCopyPitch;
}

expected<void, Error> copy_on_stream(const detail::CopyPlan& plan, const Tensor& source,
                                     void* destination, cudaStream_t stream) {
  const auto* from = static_cast<const char*>(source.data());
  auto* to = static_cast<char*>(destination);
  return plan.for_each_piece([&](const detail::CopyPiece& piece) -> expected<void, Error> {
    void* target = to + piece.destination_offset;
    const void* origin = from + piece.source_offset;
    if (piece.height == 1 || rows_one_by_one(piece)) {
      for (std::size_t row = 0; row < piece.height; ++row) {
        if (auto copied =
                detail::check_cuda(detail::cuda().memcpy_async(
                                       static_cast<char*>(target) + row * piece.destination_pitch,
                                       static_cast<const char*>(origin) + row * piece.source_pitch,
                                       piece.width, cudaMemcpyDefault, stream),
                                   "cudaMemcpyAsync");
            !copied) {
          return copied;
        }
      }
      return {};
    }
    return detail::check_cuda(
        detail::cuda().memcpy_2d_async(target, piece.destination_pitch, origin, piece.source_pitch,
                                       piece.width, piece.height, cudaMemcpyDefault, stream),
        "cudaMemcpy2DAsync");
  });
}

// Orders `stream` after the source, then queues the copy on it.
expected<void, Error> queue_copy(const detail::CopyPlan& plan, const Tensor& source,
                                 void* destination, cudaStream_t stream) {
  if (auto ready = wait_on_stream(source, stream); !ready) {
    return ready;
  }
  return copy_on_stream(plan, source, destination, stream);
}

// What giving a tensor's memory a deallocation point came to. A caller's owner may throw from its
// hook (it is not noexcept); the throw is reported here, never carried on through a copy's
// cleanup.
enum class PointOutcome { kSet, kNotTracked, kHookThrew };

// Gives `tensor`'s memory a deallocation point on `stream`, after reads or writes queued there.
PointOutcome set_deallocation_point(const Tensor& tensor, cudaStream_t stream) noexcept {
  const std::shared_ptr<TensorMemoryReference> reference = tensor.memory_reference();
  try {
    return reference != nullptr && reference->set_deallocation_stream(stream)
               ? PointOutcome::kSet
               : PointOutcome::kNotTracked;
  } catch (...) {
    return PointOutcome::kHookThrew;
  }
}

// After reads of the source were queued on `stream`: its memory must outlive them. An owner that
// tracks no deallocation stream cannot be told, so the host waits for the copy instead. Where the
// owner's hook threw, the copy is queued by then, reading the source and writing a target that
// the unwinding would free or hand back to its pool at once, so the host waits for it here too
// and the throw becomes the copy's error.
expected<void, Error> hold_source(const Tensor& source, cudaStream_t stream) {
  switch (set_deallocation_point(source, stream)) {
    case PointOutcome::kSet:
      return {};
    case PointOutcome::kHookThrew:
      (void)synchronize_cuda_stream_for_host(stream);
      return hook_threw("set_deallocation_stream");
    case PointOutcome::kNotTracked:
      break;
  }
  return synchronize_cuda_stream_for_host(stream);
}

// The host waits until `stream` has passed what was queued on it, in relaxed capture mode: in
// global mode CUDA refuses the wait while another thread captures a graph, and invalidates that
// capture.
bool wait_for_queued(cudaStream_t stream) noexcept {
  const detail::RelaxedCaptureScope relaxed;
  return detail::succeeded_or_cleared(detail::cuda().stream_synchronize(stream));
}

// A copy out failed after its reads of the source were queued on `stream`: the host waits until
// nothing queued reads the source any more or, where even that wait fails, the source is given a
// deallocation point on `stream`, so that its memory outlives the reads whatever the caller drops.
void wait_or_hold_source(const Tensor& source, cudaStream_t stream) noexcept {
  if (!wait_for_queued(stream)) {
    (void)set_deallocation_point(source, stream);  // a hook that threw leaves nothing more to try
  }
}

// A failure after the copy may have been queued on `stream`: neither the copy's memory (written
// by what was queued) nor the source's (read by it) may go before the GPU is done with it; the
// source may not be held yet (a later piece failed). Deallocation points on `stream` order both
// releases; where either cannot be recorded, the host waits for the stream.
void release_after_queued(const Tensor& source, Tensor& copy, cudaStream_t stream) noexcept {
  const bool ordered = set_deallocation_point(copy, stream) == PointOutcome::kSet &&
                       set_deallocation_point(source, stream) == PointOutcome::kSet;
  if (!ordered) {  // the host waits instead
    (void)wait_for_queued(stream);
  }
}

// Fails unless `stream` can be used (not capturing), and for a device target, is of its device.
expected<void, Error> check_stream(cudaStream_t stream, DLDevice target, const char* who) {
  auto location = detail::locate_stream(stream);
  if (!location) {
    Error error = std::move(location.error());
    error.message = std::string(who) + ": " + error.message;
    return make_unexpected(std::move(error));
  }
  if (target.device_type == kDLCUDA && location->device != target.device_id) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(who) + ": the stream is of device " +
                               std::to_string(location->device) + ", the copy goes to device " +
                               std::to_string(target.device_id));
  }
  return {};
}

// A default-stream handle names the current device's stream: for a device target, the target's
// device is made current for the call. Then `stream` must be usable and of that device.
expected<void, Error> enter_stream(std::optional<detail::DeviceGuard>& guard, DLDevice target,
                                   cudaStream_t stream, const char* who) {
  if (target.device_type == kDLCUDA && detail::is_default_stream_handle(stream)) {
    guard.emplace(target.device_id);
    if (guard->status() != cudaSuccess) {
      return make_unexpected(detail::device_guard_error(*guard, target.device_id, who));
    }
  }
  return check_stream(stream, target, who);
}

// The copy's readiness could not be recorded on its stream: why, as the copy's own memory (whose
// state is the library's) noted it, with the failing CUDA call and its error where there was one.
tl::unexpected<Error> readiness_not_recorded() {
  Error error = detail::take_point_failure();
  error.message = "Tensor::copy_to: the copy's readiness could not be recorded" +
                  (error.message.empty() ? std::string() : ": " + error.message);
  return tl::unexpected<Error>(std::move(error));
}

// Queues the copy into `destination`, then makes the source outlive it and either completes it
// (a host target) or records its readiness on `copy` (a device target).
// Any failure, the heap's included (part of the copy may be queued by then), releases the copy's
// memory and the source's after what was queued (release_after_queued).
expected<void, Error> finish_on_stream(const detail::CopyPlan& plan, const Tensor& source,
                                       Tensor& copy, cudaStream_t stream) noexcept {
  try {
    auto done = queue_copy(plan, source, copy.data(), stream);
    if (done) {
      done = hold_source(source, stream);
    }
    if (done && detail::host_memory_type(copy.device().device_type)) {
      done = synchronize_cuda_stream_for_host(stream);  // a host copy is complete on return
    } else if (done) {
      (void)detail::take_point_failure();  // none noted before this record may be reported
      if (!copy.set_readiness_stream(stream)) {
        done = readiness_not_recorded();
      }
    }
    if (!done) {
      release_after_queued(source, copy, stream);
    }
    return done;
  } catch (const std::bad_alloc&) {
    release_after_queued(source, copy, stream);
    return detail::out_of_memory();
  }
}

// The context of a copy of `source`, made before its memory is taken: once a device copy's memory
// was taken from the stream, a failure releases it after the stream (release_after_queued); one
// before the copy owned it would free it unordered with its allocation.
std::shared_ptr<DLManagedTensorContext> copy_context(const Tensor& source) {
  auto context = std::make_shared<DLManagedTensorContext>();
  const auto ndim = static_cast<std::size_t>(std::max(source.ndim(), 0));
  context->dl_shape.reserve(ndim);
  context->dl_strides.reserve(ndim);
  return context;
}

// A Tensor over `memory` with `source`'s shape and dtype, compact, IS_COPIED, writable, in
// `context` (from copy_context(): within its room, nothing is allocated).
Tensor copy_tensor(const Tensor& source, std::shared_ptr<DLManagedTensorContext> context,
                   std::shared_ptr<detail::CopyMemory> memory, DLDevice device) {
  DLTensor view = source.dl_tensor();
  view.data = memory->data();
  view.device = device;
  view.strides = nullptr;
  view.byte_offset = 0;
  const std::uint64_t flags =
      DLPACK_FLAG_BITMASK_IS_COPIED | (source.flags() & detail::kSubBytePaddedFlag);
  detail::assign_view(
      *context, view, flags,
      DLPackVersion{HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR});
  context->memory_reference = std::move(memory);
  detail::ContextAccess::mark_memory_lives_in_reference(*context);
  return Tensor(std::move(context));
}

// Host memory to the heap: by the host, no CUDA.
expected<Tensor, Error> copy_by_host(const Tensor& source, const detail::CopyPlan& plan) {
  if (auto ready = wait_on_host(source); !ready) {
    return forward_error(std::move(ready));
  }
  const DLDevice host{kDLCPU, 0};
  auto context = copy_context(source);
  auto memory = detail::CopyMemory::allocate(host, static_cast<std::size_t>(plan.bytes()), nullptr);
  if (!memory) {
    return forward_error(std::move(memory));
  }
  if (auto copied = copy_on_host(plan, source, (*memory)->data()); !copied) {
    return forward_error(std::move(copied));
  }
  return copy_tensor(source, std::move(context), std::move(*memory), host);
}

// Anything else: on `stream`. The memory is the copy's owner from the start, so that any failure
// frees it only once the GPU has passed what was queued.
expected<Tensor, Error> copy_by_stream(const Tensor& source, const detail::CopyPlan& plan,
                                       DLDevice target, cudaStream_t stream) {
  auto context = copy_context(source);
  auto memory =
      detail::CopyMemory::allocate(target, static_cast<std::size_t>(plan.bytes()), stream);
  if (!memory) {
    return forward_error(std::move(memory));
  }
  Tensor copy = copy_tensor(source, std::move(context), std::move(*memory), target);
  if (auto done = finish_on_stream(plan, source, copy, stream); !done) {
    return forward_error(std::move(done));
  }
  return copy;
}

expected<void, Error> copy_out(const Tensor& source, void* destination,
                               std::size_t destination_bytes, cudaStream_t stream, bool wait,
                               const char* who) {
  // Holoscan 5.0's order: the destination is checked before anything of the source.
  if (destination == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(who) + ": Tensor copy destination is null");
  }
  if (!source) {  // Holoscan 5.0's sentence for this refusal (copy and copy_to say "empty")
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(who) + ": Tensor copy source is null (the Tensor is empty)");
  }
  auto plan = plan_copy(source, who);
  if (!plan) {
    return forward_error(std::move(plan));
  }
  if (destination_bytes < static_cast<std::uint64_t>(plan->bytes())) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(who) + ": Tensor copy destination is too small (" +
                               std::to_string(destination_bytes) + " bytes for " +
                               std::to_string(plan->bytes()) + ")");
  }
  if (detail::host_memory_type(source.device().device_type)) {
    if (auto ready = wait_on_host(source); !ready) {
      return ready;
    }
    return copy_on_host(*plan, source, destination);
  }
  if (auto usable = check_stream(stream, DLDevice{kDLCPU, 0}, who); !usable) {
    return usable;
  }
  // A failure, the heap's included, may come after part of the copy was queued: the caller takes
  // the destination back on the error, so the call waits until nothing queued still writes it.
  try {
    auto done = queue_copy(*plan, source, destination, stream);
    if (done) {
      done = wait ? synchronize_cuda_stream_for_host(stream) : hold_source(source, stream);
    }
    if (!done) {
      wait_or_hold_source(source, stream);
    }
    return done;
  } catch (const std::bad_alloc&) {
    wait_or_hold_source(source, stream);
    throw;  // the public call's catch makes it kResourceExhausted
  }
}

}  // namespace

// Each public copy is a function-try-block: whatever the heap refused had unwound first.
expected<Tensor, Error> Tensor::copy(cudaStream_t stream) const try {
  if (dl_ctx_ == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "Tensor::copy: Tensor copy source is empty");
  }
  return copy_to(device(), stream);
} catch (const std::bad_alloc&) {
  return detail::out_of_memory();
}

expected<Tensor, Error> Tensor::copy_to(DLDevice device, cudaStream_t stream) const try {
  constexpr const char* kWho = "Tensor::copy_to";
  auto plan = plan_copy(*this, kWho);
  if (!plan) {
    return forward_error(std::move(plan));
  }
  if (!detail::copyable_device_type(device.device_type)) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": Tensor copy target device is unsupported (" +
                               std::to_string(device.device_type) + ")");
  }
  // Refused here, as the argument it is: with a default-stream handle it would reach
  // cudaSetDevice and come back as a CUDA failure. A host target's negative id is refused too,
  // as an import refuses it, rather than quietly made 0.
  if (device.device_id < 0) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": Tensor copy target device id " +
                               std::to_string(device.device_id) + " is negative");
  }
  // Host-side memory has no device of its own (it is reported as id 0): another id names a device
  // that does not exist, refused as Holoscan 5.0's Python refuses it, rather than quietly made 0.
  if (device.device_type != kDLCUDA && device.device_id != 0) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": Tensor copy target device is unsupported: (" +
                               std::to_string(device.device_type) + ", " +
                               std::to_string(device.device_id) +
                               ") names a host device other than 0");
  }
  if (device.device_type == kDLCPU && detail::host_memory_type(this->device().device_type)) {
    return copy_by_host(*this, *plan);
  }
  std::optional<detail::DeviceGuard> guard;
  if (auto usable = enter_stream(guard, device, stream, kWho); !usable) {
    return forward_error(std::move(usable));
  }
  return copy_by_stream(*this, *plan, device, stream);
} catch (const std::bad_alloc&) {
  return detail::out_of_memory();
}

expected<Tensor, Error> Tensor::copy_to(TensorPool& pool, cudaStream_t stream) const try {
  constexpr const char* kWho = "Tensor::copy_to(TensorPool&)";
  auto plan = plan_copy(*this, kWho);
  if (!plan) {
    return forward_error(std::move(plan));
  }
  if ((flags() & detail::kSubBytePaddedFlag) != 0 && detail::is_packed_sub_byte(dtype(), 0)) {
    return make_unexpected(
        ErrorCode::kNotSupported,
        std::string(kWho) + ": a pool block holds packed sub-byte elements, not padded ones");
  }
  const DLDevice target = pool.device();
  const bool host_pool = target.device_type == kDLCPU;
  std::optional<detail::DeviceGuard> guard;
  if (!host_pool || !detail::host_memory_type(device().device_type)) {
    if (auto usable = enter_stream(guard, target, stream, kWho); !usable) {
      return forward_error(std::move(usable));
    }
  }
  // A device block is handed over in stream order; a host block once the GPU is done with it.
  auto block =
      host_pool ? pool.allocate(shape(), dtype()) : pool.allocate(shape(), dtype(), stream);
  if (!block) {
    return block;
  }
  block->dl_ctx()->tensor.flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
  if (host_pool && detail::host_memory_type(device().device_type)) {
    auto copied = wait_on_host(*this);
    if (copied) {
      copied = copy_on_host(*plan, *this, block->data());
    }
    return copied ? std::move(block) : forward_error(std::move(copied));
  }
  if (auto done = finish_on_stream(*plan, *this, *block, stream); !done) {
    return forward_error(std::move(done));
  }
  return block;
} catch (const std::bad_alloc&) {
  return detail::out_of_memory();
}

expected<void, Error> Tensor::copy_to_host(void* destination, std::size_t destination_bytes,
                                           cudaStream_t stream) const try {
  return copy_out(*this, destination, destination_bytes, stream, /*wait=*/true,
                  "Tensor::copy_to_host");
} catch (const std::bad_alloc&) {
  return detail::out_of_memory();
}

expected<void, Error> Tensor::copy_to_host_async(void* destination, std::size_t destination_bytes,
                                                 cudaStream_t stream) const try {
  return copy_out(*this, destination, destination_bytes, stream, /*wait=*/false,
                  "Tensor::copy_to_host_async");
} catch (const std::bad_alloc&) {
  return detail::out_of_memory();
}

}  // namespace holoscan
