#include <atomic>
#include <memory>
#include <new>
#include <string>

#include "dlpack/context_access.hpp"
#include "dlpack/context_recycler.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "dlpack/import_owner.hpp"
#include "dlpack/own_export.hpp"
#include "dlpack/recycler.hpp"
#include "dlpack/tensor_view.hpp"
#include "dlpack/without_throwing.hpp"
#include "holoscan/tensor.hpp"
#include "stream/tracked_streams.hpp"

namespace holoscan {
namespace {

// A Tensor over a context whose memory reference already counts this Tensor's claim (see
// Tensor's rule for subclasses that assign dl_ctx_ themselves): it retains nothing.
class ClaimedTensor : public Tensor {
 public:
  explicit ClaimedTensor(std::shared_ptr<DLManagedTensorContext> claimed) noexcept {
    dl_ctx_ = std::move(claimed);
  }
};

Error out_of_memory(const char* who) {
  return Error{ErrorCode::kResourceExhausted,
               std::string(who) + ": out of host memory (the caller keeps ownership)", 0};
}

// Validates first and takes ownership last: until the owner exists nothing can run the deleter,
// so every failure before it leaves the producer's tensor with the caller, untouched. The rules
// are checked while the recycled context is filled, in one pass; once warm nothing is allocated
// and no lock is taken (recycler.hpp).
template <class Buffer, class Managed>
expected<Tensor, Error> import_managed(Managed* managed, std::uint64_t flags, DLPackVersion version,
                                       const char* who) {
  const DLTensor& producer = managed->dl_tensor;
  detail::LayoutFacts facts;
  DLManagedTensorContext* context = detail::take_context();
  if (context == nullptr) {
    return make_unexpected(detail::check_dl_tensor(producer, flags, facts) !=
                                   detail::LayoutFault::kNone
                               ? detail::dl_tensor_error(facts, producer, who)
                               : out_of_memory(who));
  }
  if (detail::assign_checked_view(*context, producer, flags, version, facts) !=
      detail::LayoutFault::kNone) {
    detail::give_context(context);
    return make_unexpected(detail::dl_tensor_error(facts, producer, who));
  }
  std::shared_ptr<DLManagedTensorContext> shared;
  try {
    shared = detail::share_recycled(context);  // gives the context back if it throws
  } catch (...) {
    return make_unexpected(out_of_memory(who));
  }
  // One pointer has one consumer: this library's export taken by an import before is refused
  // (its owner may be recycled into a later export the moment the first import lets go).
  std::atomic<bool>* taken = detail::own_export_taken(managed);
  if (taken != nullptr && taken->exchange(true, std::memory_order_acq_rel)) {
    return make_unexpected(detail::export_taken_error(who));
  }
  // Its first claim (the Tensor's) counted; nothing can fail after it.
  std::shared_ptr<Buffer> owner = detail::ImportOwnerAccess::make<Buffer>(managed);
  if (owner == nullptr) {
    if (taken != nullptr) {
      taken->store(false, std::memory_order_release);  // not taken after all
    }
    return make_unexpected(out_of_memory(who));
  }
  shared->memory_reference = std::move(owner);
  detail::ContextAccess::mark_memory_lives_by_holds(*shared);
  // Imported ownership establishes no local writer: read-only for good, whatever the flags say.
  detail::ContextAccess::narrow_to_read_only(*shared);
  return Tensor(ClaimedTensor(std::move(shared)));
}

expected<Tensor, Error> import_versioned(DLManagedTensorVersioned* dl_managed_tensor_ver_ptr) {
  constexpr const char* kWho = "make_tensor_from_dlpack_versioned";
  DLManagedTensorVersioned* managed = dl_managed_tensor_ver_ptr;
  if (managed == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": the DLManagedTensorVersioned pointer is null");
  }
  if (detail::own_export_spent(managed)) {
    return make_unexpected(detail::export_spent_error(kWho));  // read nothing more of it
  }
  // On another major version only the fields up to `flags` have a known layout: read no further.
  const DLPackVersion version = managed->version;
  if (version.major != DLPACK_MAJOR_VERSION) {
    // A newer major is refused with Holoscan 5.0's sentence (5.0 takes an older one; we do not).
    const std::string newer =
        version.major > DLPACK_MAJOR_VERSION
            ? "Unsupported DLPack major version " + std::to_string(version.major) +
                  " (this build supports up to " + std::to_string(DLPACK_MAJOR_VERSION) + "): "
            : std::string();
    return make_unexpected(
        ErrorCode::kInvalidArgument,
        std::string(kWho) + ": " + newer + "version.major " + std::to_string(version.major) +
            " is not " + std::to_string(DLPACK_MAJOR_VERSION) + " (the caller keeps ownership)");
  }
  if ((managed->flags & ~detail::known_flag_bits()) != 0) {
    return make_unexpected(detail::unknown_flags_error(managed->flags, kWho));
  }
  return import_managed<DLManagedMemoryBufferVersioned>(managed, managed->flags, version, kWho);
}

expected<Tensor, Error> import_legacy(DLManagedTensor* dl_managed_tensor_ptr) {
  constexpr const char* kWho = "make_tensor_from_dlpack";
  if (dl_managed_tensor_ptr == nullptr) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           std::string(kWho) + ": the DLManagedTensor pointer is null");
  }
  if (detail::own_export_spent(dl_managed_tensor_ptr)) {
    return make_unexpected(detail::export_spent_error(kWho));  // read nothing more of it
  }
  // A legacy tensor is read as a current-version tensor without flags (Holoscan 5.0).
  return import_managed<DLManagedMemoryBuffer>(
      dl_managed_tensor_ptr, 0, DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, kWho);
}

}  // namespace

// A refusal's message needs the heap: should it refuse, the import is still refused (nothing was
// taken), as kResourceExhausted, never with an exception.
expected<Tensor, Error> make_tensor_from_dlpack_versioned(
    DLManagedTensorVersioned* dl_managed_tensor_ver_ptr) {
  return detail::without_throwing([&] { return import_versioned(dl_managed_tensor_ver_ptr); });
}

expected<Tensor, Error> make_tensor_from_dlpack(DLManagedTensor* dl_managed_tensor_ptr) {
  return detail::without_throwing([&] { return import_legacy(dl_managed_tensor_ptr); });
}

Tensor::Tensor(DLManagedTensor* dl_managed_tensor_ptr) {
  auto imported = make_tensor_from_dlpack(dl_managed_tensor_ptr);
  if (!imported) {
    throw RuntimeError(imported.error());
  }
  *this = std::move(*imported);
}

Tensor::Tensor(DLManagedTensorVersioned* dl_managed_tensor_ver_ptr) {
  auto imported = make_tensor_from_dlpack_versioned(dl_managed_tensor_ver_ptr);
  if (!imported) {
    throw RuntimeError(imported.error());
  }
  *this = std::move(*imported);
}

}  // namespace holoscan
