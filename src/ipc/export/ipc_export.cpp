// export_tensor: from a Tensor to a descriptor another process can map, plus the claim and the
// interprocess readiness event its exporter keeps until the importer is done.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "cuda/cuda_error.hpp"
#include "cuda/device_guard.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "dlpack/held_claim.hpp"
#include "holoscan/ipc/exporter.hpp"
#include "ipc/cuda/cuda_driver_error.hpp"
#include "ipc/cuda/cuda_ipc_api.hpp"
#include "ipc/cuda/ipc_event_pool.hpp"
#include "ipc/export/ipc_memory_source.hpp"
#include "stream/stream_point.hpp"

namespace holoscan::ipc {

using holoscan::detail::ExportableAllocation;
using holoscan::detail::IpcEvent;

struct ExportedTensor::State {
  TensorDescriptor descriptor;
  ExportableAllocation allocation;  // owns the fd made for this export, if one was
  IpcEvent readiness;               // null event when there is none
  // The memory exported, on the reference it was exported from; keeps a lent fd's owner alive.
  holoscan::detail::HeldClaim claim;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  // The importer may wait on the event until it releases the export: only then may it be reused.
  ~State() { holoscan::detail::release_ipc_event(readiness); }
};

namespace {

constexpr const char* kWho = "ipc export: ";

Error refused(const std::string& why) {
  return Error{ErrorCode::kInvalidArgument, std::string(kWho) + why, 0};
}

// Every import and the pool keep these bounds, but a view written by hand into a context need
// not: describe_layout() copies ndim extents from the shape pointer before validate() runs.
expected<void, Error> check_view(const Tensor& tensor) {
  const DLTensor& view = tensor.dl_tensor();
  if (view.ndim < 0 || static_cast<std::size_t>(view.ndim) > kMaxDescriptorDims) {
    return make_unexpected(refused("ndim " + std::to_string(view.ndim) + " is outside [0, " +
                                   std::to_string(kMaxDescriptorDims) + "]"));
  }
  if (view.ndim > 0 && view.shape == nullptr) {
    return make_unexpected(
        refused("the tensor has " + std::to_string(view.ndim) + " dimensions and no shape"));
  }
  return {};
}

void describe_layout(const Tensor& tensor, TensorDescriptor& d) {
  const DLTensor& view = tensor.dl_tensor();
  d.dtype = view.dtype;
  d.shape.assign(view.shape, view.shape + view.ndim);
  d.strides.resize(d.shape.size());
  if (view.strides != nullptr) {
    d.strides.assign(view.strides, view.strides + view.ndim);
  } else {
    holoscan::detail::compact_strides(view.ndim, view.shape, d.strides.data());
  }
  d.dlpack_flags = tensor.flags() | DLPACK_FLAG_BITMASK_READ_ONLY;  // imports are read-only
}

expected<void, Error> describe_memory(const Tensor& tensor, const ExportableAllocation& allocation,
                                      TensorDescriptor& d) {
  const auto data = reinterpret_cast<std::uintptr_t>(tensor.data());
  const auto base = reinterpret_cast<std::uintptr_t>(allocation.base);
  if (data < base || data - base > allocation.bytes) {
    return make_unexpected(refused("the tensor's data does not lie in its allocation"));
  }
  d.handle_kind = allocation.kind;
  d.allocation_id = allocation.allocation_id;
  d.handle_bytes = allocation.handle;
  d.allocation_bytes = allocation.bytes;
  d.offset = data - base;
  CUuuid uuid{};
  if (auto status = holoscan::detail::check_driver(
          holoscan::detail::cuda_ipc().device_get_uuid(&uuid, allocation.device),
          "cuDeviceGetUuid");
      !status) {
    return status;
  }
  std::memcpy(d.device_uuid.data(), &uuid, sizeof(uuid));
  return {};
}

// Records the interprocess event the importer waits on: after the tensor's readiness point, on
// `stream` (the readiness stream itself costs no wait).
expected<IpcEvent, Error> record_readiness(const Tensor& tensor, cudaStream_t stream) {
  if (tensor.has_readiness_stream_contract()) {
    if (auto ordered = tensor.synchronize_for_consumer_stream(stream); !ordered) {
      return tl::unexpected<Error>(std::move(ordered.error()));
    }
  }
  auto location = holoscan::detail::locate_stream(stream);
  if (!location) {
    return tl::unexpected<Error>(std::move(location.error()));
  }
  auto event = holoscan::detail::acquire_ipc_event(location->device);
  if (!event) {
    return event;
  }
  holoscan::detail::DeviceGuard guard(location->device);
  cudaError_t status = guard.status();
  if (status == cudaSuccess) {
    status = holoscan::detail::cuda_ipc().event_record(event->event, stream);
  }
  if (status != cudaSuccess) {
    holoscan::detail::release_ipc_event(*event);
    return tl::unexpected<Error>(holoscan::detail::cuda_error(
        status,
        guard.status() != cudaSuccess ? guard.failed_call() : "cudaEventRecord(readiness)"));
  }
  return event;
}

expected<ExportedTensor, Error> export_with(const Tensor& tensor, std::uint64_t export_id,
                                            const cudaStream_t* stream) {
  if (!tensor) {
    return make_unexpected(refused("the tensor is empty"));
  }
  if (tensor.data() == nullptr) {
    return make_unexpected(refused("the tensor has no memory (null data)"));
  }
  if (auto view = check_view(tensor); !view) {
    return tl::unexpected<Error>(std::move(view.error()));
  }
  std::unique_ptr<ExportedTensor::State> state;
  try {
    state = std::make_unique<ExportedTensor::State>();
    state->claim = holoscan::detail::HeldClaim(tensor.dl_ctx());
    TensorDescriptor& d = state->descriptor;
    d.export_id = export_id;
    d.exporter_pid = static_cast<std::uint32_t>(::getpid());
    describe_layout(tensor, d);
  } catch (const std::bad_alloc&) {
    return make_unexpected(ErrorCode::kResourceExhausted, std::string(kWho) + "out of host memory");
  }
  auto allocation = holoscan::detail::shareable_allocation(tensor);
  if (!allocation) {
    return tl::unexpected<Error>(std::move(allocation.error()));
  }
  state->allocation = std::move(*allocation);
  if (auto memory = describe_memory(tensor, state->allocation, state->descriptor); !memory) {
    return tl::unexpected<Error>(std::move(memory.error()));
  }
  if (auto valid = validate(state->descriptor); !valid) {
    return tl::unexpected<Error>(std::move(valid.error()));
  }
  // Last, so that no refusal above leaves an event recorded for nothing.
  if (stream != nullptr || tensor.has_readiness_stream_contract()) {
    const cudaStream_t on = stream != nullptr ? *stream : tensor.readiness_stream();
    auto event = record_readiness(tensor, on);
    if (!event) {
      return tl::unexpected<Error>(std::move(event.error()));
    }
    state->readiness = *event;
    state->descriptor.has_readiness_event = true;
    state->descriptor.readiness_event = event->handle;
  }
  return ExportedTensor(std::move(state));
}

}  // namespace

namespace {

// What a moved-from export describes: nothing (export id 0). Made at load, not at first use: no
// first-use guard that a fork() could copy taken.
const TensorDescriptor kNoDescriptor{};

}  // namespace

ExportedTensor::ExportedTensor(std::unique_ptr<State> state) noexcept : state_(std::move(state)) {}
ExportedTensor::ExportedTensor(ExportedTensor&& other) noexcept = default;
ExportedTensor& ExportedTensor::operator=(ExportedTensor&& other) noexcept = default;
ExportedTensor::~ExportedTensor() = default;

const TensorDescriptor& ExportedTensor::descriptor() const noexcept {
  return state_ != nullptr ? state_->descriptor : kNoDescriptor;
}

int ExportedTensor::fd() const noexcept {
  return state_ != nullptr ? state_->allocation.descriptor() : -1;
}

int ExportedTensor::device() const noexcept {
  return state_ != nullptr ? state_->allocation.device : -1;
}

expected<ExportedTensor, Error> export_tensor(const Tensor& tensor, std::uint64_t export_id) {
  return export_with(tensor, export_id, nullptr);
}

expected<ExportedTensor, Error> export_tensor(const Tensor& tensor, std::uint64_t export_id,
                                              cudaStream_t stream) {
  return export_with(tensor, export_id, &stream);
}

}  // namespace holoscan::ipc
