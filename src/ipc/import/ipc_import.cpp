// import_tensor: from a descriptor (and its fd) to a read-only, Holoscan-owned Tensor over the
// exporter's memory, mapped on the device the descriptor names by UUID.
#include <memory>
#include <new>
#include <string>

#include "dlpack/context_access.hpp"
#include "dlpack/context_recycler.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "dlpack/recycler.hpp"
#include "dlpack/tensor_view.hpp"
#include "holoscan/ipc/importer.hpp"
#include "ipc/import/ipc_import_reference.hpp"
#include "ipc/import/ipc_importer_core.hpp"
#include "ipc/ipc_error.hpp"

namespace holoscan::ipc {
namespace {

constexpr const char* kWho = "ipc import";

Error refused(ErrorCode code, const std::string& why) {
  return Error{code, std::string(kWho) + ": " + why, 0};
}

// Whether the handle kind and the fd that came with it agree, before anything is mapped.
expected<void, Error> check_handle(const TensorDescriptor& descriptor, const UniqueFd& fd) {
  switch (descriptor.handle_kind) {
    case MemoryHandleKind::kPosixFd:
      // Without an fd, an allocation id names a mapping held already (the mapping cache checks).
      if (!fd.valid() && descriptor.allocation_id == 0) {
        return make_unexpected(refused(ErrorCode::kInvalidArgument,
                                       "handle kind kPosixFd needs the allocation's file "
                                       "descriptor, and none came"));
      }
      return {};
    case MemoryHandleKind::kCudaIpc:
      if (fd.valid()) {
        return make_unexpected(refused(ErrorCode::kInvalidArgument,
                                       "handle kind kCudaIpc carries no file descriptor, but one "
                                       "came (it is closed)"));
      }
      return {};
    case MemoryHandleKind::kFake:
      return make_unexpected(refused(ErrorCode::kNotImplemented,
                                     "handle kind kFake names no memory (protocol tests only)"));
  }
  return make_unexpected(refused(ErrorCode::kInvalidArgument, "unknown handle kind"));
}

// The wire carries DLPack 1.3's flags and type codes; a build against older DLPack headers
// knows fewer, and refuses the others before anything is mapped, as its local imports do.
expected<void, Error> check_known_to_this_build(const TensorDescriptor& descriptor) {
  if (const auto fault = holoscan::detail::check_dtype(descriptor.dtype,
                                                       holoscan::detail::build_last_dtype_code());
      fault != holoscan::detail::LayoutFault::kNone) {
    return make_unexpected(holoscan::detail::dtype_error(fault, descriptor.dtype, kWho));
  }
  if ((descriptor.dlpack_flags & ~holoscan::detail::known_flag_bits()) != 0) {
    return make_unexpected(holoscan::detail::unknown_flags_error(descriptor.dlpack_flags, kWho));
  }
  return {};
}

expected<Tensor, Error> import_with(const std::shared_ptr<detail::ImporterCore>& core,
                                    const TensorDescriptor& descriptor, UniqueFd fd,
                                    bool from_channel) {
  if (auto valid = validate(descriptor); !valid) {
    return make_unexpected(std::move(valid.error()));
  }
  if (auto readable = check_known_to_this_build(descriptor); !readable) {
    return make_unexpected(std::move(readable.error()));
  }
  if (auto handle = check_handle(descriptor, fd); !handle) {
    return make_unexpected(std::move(handle.error()));
  }
  auto device = core->device_of(descriptor.device_uuid);
  if (!device) {
    return make_unexpected(std::move(device.error()));
  }
  auto mapping = core->mapping(descriptor, std::move(fd), *device, from_channel);
  if (!mapping) {
    return make_unexpected(std::move(mapping.error()));
  }
  std::shared_ptr<holoscan::detail::OpenedEvent> readiness;
  if (descriptor.has_readiness_event) {
    auto opened = core->readiness_event(descriptor.readiness_event, *device);
    if (!opened) {
      return make_unexpected(std::move(opened.error()));
    }
    readiness = std::move(*opened);
  }
  DLTensor view{};
  view.data = (*mapping)->base() + descriptor.offset;
  view.device = DLDevice{kDLCUDA, *device};
  view.ndim = static_cast<std::int32_t>(descriptor.shape.size());
  view.dtype = descriptor.dtype;
  view.shape = const_cast<std::int64_t*>(descriptor.shape.data());  // read only: copied below
  view.strides = const_cast<std::int64_t*>(descriptor.strides.data());
  // The layout is checked again while a recycled context is filled, in one pass (the type codes
  // and flags were checked against this build's before anything was mapped).
  DLManagedTensorContext* raw = holoscan::detail::take_context();
  if (raw == nullptr) {
    return make_unexpected(refused(ErrorCode::kResourceExhausted, "out of host memory"));
  }
  holoscan::detail::LayoutFacts facts;
  if (holoscan::detail::assign_checked_view(
          *raw, view, descriptor.dlpack_flags,
          DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
          facts) != holoscan::detail::LayoutFault::kNone) {
    holoscan::detail::give_context(raw);
    return make_unexpected(holoscan::detail::dl_tensor_error(facts, view, kWho));
  }
  std::shared_ptr<DLManagedTensorContext> context;
  try {
    context = holoscan::detail::share_recycled(raw);  // gives `raw` back if it throws
    // Last: from here on the reference owns the import and gives it back when it goes.
    context->memory_reference = std::allocate_shared<detail::ImportedReference>(
        holoscan::detail::RecyclingAllocator<detail::ImportedReference>{}, core,
        std::move(*mapping), std::move(readiness), descriptor.export_id, *device);
  } catch (const std::bad_alloc&) {
    return make_unexpected(refused(ErrorCode::kResourceExhausted, "out of host memory"));
  }
  core->imported();
  // Imported memory establishes no local writer: read-only for good (Holoscan 5.0).
  holoscan::detail::ContextAccess::narrow_to_read_only(*context);
  return Tensor(std::move(context));
}

}  // namespace

namespace detail {

expected<Tensor, Error> import_promised(const std::shared_ptr<ImporterCore>& core,
                                        const TensorDescriptor& descriptor, UniqueFd fd,
                                        bool promised, bool from_channel) {
  // First: a refusal here gives nothing back (see ImporterCore::admit).
  if (auto admitted = core->admit(descriptor, promised, from_channel); !admitted) {
    return make_unexpected(std::move(admitted.error()));
  }
  expected<Tensor, Error> imported = make_unexpected(out_of_memory(kWho));
  try {
    imported = import_with(core, descriptor, std::move(fd), from_channel);
  } catch (const std::bad_alloc&) {
    // Out of memory where no refusal was built (e.g. listing the devices): given back as well.
  }
  if (!imported) {
    // Given back at once, so that the exporter's claim does not wait for this process to exit;
    // a Publish's allocation mapping goes too, as the exporter will count it when the refusal
    // comes (a caller's refusal leaves the channel's mapping: see ImporterCore::refuse).
    core->refuse(
        descriptor.export_id,
        descriptor.handle_kind == MemoryHandleKind::kPosixFd ? descriptor.allocation_id : 0,
        from_channel);
  }
  return imported;
}

}  // namespace detail

expected<Tensor, Error> import_tensor(const TensorDescriptor& descriptor, UniqueFd fd,
                                      Importer& peer) {
  const holoscan::detail::CallUnderWay call(detail::calls_of(peer.core_.get()));
  if (peer.core_ == nullptr) {
    return make_unexpected(detail::importer_moved_from());
  }
  if (call.ending()) {
    return make_unexpected(detail::importer_ending(*peer.core_));
  }
  // Here, so that giving it back later never allocates.
  const bool promised = peer.core_->promise_release();
  return detail::import_promised(peer.core_, descriptor, std::move(fd), promised, false);
}

}  // namespace holoscan::ipc
