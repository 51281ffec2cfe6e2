#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <type_traits>

#include "dlpack/context_access.hpp"
#include "dlpack/dlpack_validate.hpp"
#include "dlpack/export_owner.hpp"
#include "dlpack/held_claim.hpp"
#include "dlpack/kept_blocks.hpp"
#include "dlpack/mutable_export_lease.hpp"
#include "dlpack/own_export.hpp"
#include "dlpack/read_only_export.hpp"
#include "dlpack/without_throwing.hpp"
#include "holoscan/tensor.hpp"

namespace holoscan {
namespace {

// As many as a context remembers of a checked view, so that its fast path copies into the owner.
constexpr std::int32_t kInlineDims = detail::ContextAccess::kCheckedDims;

// One allocation per export (for ndim <= kInlineDims): the managed tensor, its own shape and
// explicit strides, and a claim on the memory it was exported from (held_claim.hpp), which keeps
// the context and that memory alive until the deleter drops it; for a writable view, the
// context's mutable export lease too.
template <class Managed>
struct ExportedTensor {
  Managed managed;  // every field is written before it is handed out
  detail::HeldClaim claim;
  // Declared after the claim, so ended before it: a pool block is never lent anew while its
  // context still says an export of it is alive.
  detail::MutableExportLease lease;
  // An import of this library took the export (own_export.hpp): a second import is refused.
  std::atomic<bool> imported{false};
  std::array<std::int64_t, 2 * kInlineDims> inline_dims;  // written before it is read
  std::unique_ptr<std::int64_t[]> heap_dims;

  // The owner's memory is recycled: once warm an export and its deleter allocate nothing and
  // take no lock (recycler.hpp). It stays an export owner's for good (kept_blocks.hpp), so that a
  // second call of the deleter reads the cleared owner, never freed memory or another object.
  static ExportedTensor* make() noexcept {
    void* memory = detail::KeptBlocks<ExportedTensor>::take();
    if (memory == nullptr) {
      return nullptr;
    }
    detail::unpoison_memory(memory, sizeof(ExportedTensor));
    return new (memory) ExportedTensor;  // no zeroing
  }
  static void destroy(ExportedTensor* owner) noexcept {
    owner->~ExportedTensor();
    // What a stale pointer may still read stays readable under AddressSanitizer, which reports
    // any other use of the gone owner: the fields a second deleter call reads (manager_ctx and
    // the deleter beside it), and the link the kept blocks write (the start of `managed`, before
    // either; `managed` is the first member, at the block's start). Only the rest is poisoned,
    // never those, since a second call on another thread may read them at once.
    constexpr std::size_t kLink = detail::KeptBlocks<ExportedTensor>::kLinkBytes;
    constexpr std::size_t kContext = offsetof(Managed, manager_ctx);
    constexpr std::size_t kRead = sizeof(void*) + sizeof(Managed::deleter);
    static_assert(kContext >= kLink && offsetof(Managed, deleter) == kContext + sizeof(void*),
                  "the kept blocks' link would overwrite what a second deleter call reads");
    auto* bytes = reinterpret_cast<unsigned char*>(owner);
    detail::poison_memory(bytes + kLink, kContext - kLink);
    detail::poison_memory(bytes + kContext + kRead, sizeof(ExportedTensor) - kContext - kRead);
    detail::KeptBlocks<ExportedTensor>::give(owner);
  }
  /** @brief Deleter of the unique_ptr that holds an owner until it is handed out. */
  struct Destroy {
    void operator()(ExportedTensor* owner) const noexcept { destroy(owner); }
  };

  static void delete_export(Managed* self) noexcept {
    // A second call (a caller bug) finds the owner taken while the block waits for a later
    // export (its memory is an export owner's for good): reported, instead of giving the block
    // back twice. Taken in one exchange, so that of two calls at once on two threads one wins.
    auto* owner = static_cast<ExportedTensor*>(detail::take_export_owner(*self));
    if (owner == nullptr) {
      return;
    }
    destroy(owner);  // the claim goes with it; the deleter stays: a second call must reach here
  }

  // Room for `ndim` extents and as many strides; false when the heap refuses.
  std::int64_t* dims(std::int32_t ndim) noexcept {
    if (ndim <= kInlineDims) {
      return inline_dims.data();
    }
    heap_dims.reset(new (std::nothrow) std::int64_t[2 * static_cast<std::size_t>(ndim)]);
    return heap_dims.get();
  }
};

// The error of a view that export_context() found broken, checked again to name the field.
[[gnu::noinline, gnu::cold]] Error refusal(const DLTensor& source, std::uint64_t flags,
                                          const char* who) {
  detail::LayoutFacts facts;
  (void)detail::check_dl_tensor(source, flags, facts);
  return detail::dl_tensor_error(facts, source, who);
}

// Not a view the library checked, or one whose values were written in place since (its vectors
// are public): checked like an import while its shape and strides are copied out into `dims`.
[[gnu::noinline]] bool check_view(const DLTensor& source, std::uint64_t flags,
                                  std::int64_t* dims) noexcept {
  detail::LayoutFacts facts;
  return detail::check_dl_tensor(source, flags, facts, dims, dims + source.ndim) ==
         detail::LayoutFault::kNone;
}

// What a checked layout leaves open, since the view's other fields are public too: a device no
// DLPack reader knows, and null data for elements (5.0: "Tensor has no data to export"). The span
// was checked from the same first element's address (copy_if_checked compares it).
bool placed(const DLTensor& source, const std::int64_t* extents) noexcept {
  return detail::known_device_type(source.device.device_type) && source.device.device_id >= 0 &&
         (source.data != nullptr || detail::element_count(source.ndim, extents) == 0);
}

// The producer's version travels with the tensor (as in Holoscan 5.0). A new context starts at
// this build's version; one whose version was written by hand to another major (0, which contexts
// started at before) is stamped with this build's, which describes its layout.
DLPackVersion exported_version(DLPackVersion context_version) noexcept {
  if (context_version.major != DLPACK_MAJOR_VERSION) {
    return DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  }
  return context_version;
}

// Holoscan 5.0's refusal of a second export of a writable view while the first is alive: a
// versioned export says kPermissionDenied, a legacy one kNotSupported, each with 5.0's sentence.
[[gnu::noinline, gnu::cold]] Error export_alive(const char* who, bool legacy) {
  constexpr const char* kWhy =
      " (a writable Tensor has one DLPack export at a time, until that export's deleter runs; "
      "export a read-only view or hand on Tensor copies to share it)";
  if (legacy) {
    return Error{ErrorCode::kNotSupported,
                 std::string(who) +
                     ": Legacy DLPack cannot represent read-only Tensor authority or an active "
                     "read lease: the Tensor has an active mutable DLPack export" +
                     kWhy,
                 0};
  }
  return Error{ErrorCode::kPermissionDenied,
               std::string(who) + ": Tensor has an active mutable DLPack export" + kWhy, 0};
}

template <class Managed>
expected<Managed*, Error> export_context(const std::shared_ptr<DLManagedTensorContext>& context,
                                         std::uint64_t flags, const char* who) {
  if (context == nullptr) {
    // Holoscan 5.0's sentence for this refusal, then ours.
    return make_unexpected(
        ErrorCode::kInvalidArgument,
        std::string(who) + ": Tensor has no data to export (the Tensor is empty)");
  }
  const DLTensor& source = context->tensor.dl_tensor;
  const std::int32_t ndim = source.ndim;
  if (ndim < 0 || ndim > kMaxTensorDims) {
    return make_unexpected(refusal(source, flags, who));
  }
  // A hand-written view's flags may carry bits a reader would take for something this build does
  // not mean: refused, as an import refuses them.
  if ((flags & ~detail::known_flag_bits()) != 0) {
    return make_unexpected(detail::unknown_flags_error(flags, who));
  }
  std::unique_ptr<ExportedTensor<Managed>, typename ExportedTensor<Managed>::Destroy> owner(
      ExportedTensor<Managed>::make());
  std::int64_t* dims = owner != nullptr ? owner->dims(ndim) : nullptr;
  if (dims == nullptr) {
    return make_unexpected(
        ErrorCode::kResourceExhausted,
        std::string(who) + ": DLPack export allocation failed (out of host memory)");
  }
  // Strides are always written out: DLPack >= 1.2 requires them, and older readers accept them.
  // The view checked before is reused only at offset 0: the record of it holds no byte_offset,
  // and one written by hand since could place the span past int64.
  if (source.byte_offset == 0 && detail::ContextAccess::copy_if_checked(*context, dims)
          ? !placed(source, dims)
          : !check_view(source, flags, dims)) {
    return make_unexpected(refusal(source, flags, who));
  }
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    owner->managed.version = exported_version(context->tensor.version);
    owner->managed.flags = flags;
  }
  DLTensor& target = owner->managed.dl_tensor;
  target = source;
  target.shape = ndim > 0 ? dims : nullptr;
  target.strides = ndim > 0 ? dims + ndim : nullptr;
  // An export without READ_ONLY hands out write access: one at a time (Holoscan 5.0's exclusive
  // claim; a read-only view exports any number of times). A legacy export never carries the flag:
  // read-only authority is refused before. Taken last, when nothing else can refuse the export,
  // so that a refused one never held it.
  if ((flags & DLPACK_FLAG_BITMASK_READ_ONLY) == 0) {
    owner->lease = detail::MutableExportLease::take(context);
    if (!owner->lease) {
      return make_unexpected(export_alive(who, std::is_same_v<Managed, DLManagedTensor>));
    }
  }
  owner->claim = detail::HeldClaim(context);
  detail::publish_export_owner(owner->managed, &ExportedTensor<Managed>::delete_export,
                               owner.get());
  return &owner.release()->managed;
}

expected<DLManagedTensor*, Error> export_legacy(const Tensor& tensor) {
  if (tensor.dl_ctx() != nullptr && tensor.is_read_only()) {
    // Holoscan 5.0's sentence at this refusal (Tensor::to_dlpack, 0x8c4309 of
    // libholoscan_core.so.5), then what to do instead.
    return make_unexpected(ErrorCode::kNotSupported,
                           "Tensor::to_dlpack: Legacy DLPack cannot represent read-only Tensor "
                           "authority or an active read lease; use to_dlpack_versioned");
  }
  if ((tensor.flags() & detail::kSubBytePaddedFlag) != 0 &&
      detail::is_packed_sub_byte(tensor.dtype(), 0)) {
    return make_unexpected(ErrorCode::kInvalidArgument,
                           "Tensor::to_dlpack: the tensor's sub-byte elements are padded "
                           "(IS_SUBBYTE_TYPE_PADDED), which a legacy DLManagedTensor cannot say; "
                           "use to_dlpack_versioned");
  }
  return export_context<DLManagedTensor>(tensor.dl_ctx(), tensor.flags(), "Tensor::to_dlpack");
}

// The context's authority as a versioned export's flags: its own, plus READ_ONLY where it is
// read-only (a READ_ONLY flag seen narrows it for good: is_read_only()).
std::uint64_t versioned_flags(const std::shared_ptr<DLManagedTensorContext>& context) noexcept {
  if (context == nullptr) {
    return 0;
  }
  return context->tensor.flags |
         (detail::ContextAccess::read_only_once_flagged(*context) ? DLPACK_FLAG_BITMASK_READ_ONLY
                                                                  : 0);
}

}  // namespace

expected<DLManagedTensorVersioned*, Error> Tensor::to_dlpack_versioned() const {
  const std::uint64_t flags = versioned_flags(dl_ctx_);
  // An export never throws, though a refusal's message needs the heap; the claim is taken last.
  return detail::without_throwing([&] {
    return export_context<DLManagedTensorVersioned>(dl_ctx_, flags, "Tensor::to_dlpack_versioned");
  });
}

expected<DLManagedTensor*, Error> Tensor::to_dlpack() const {
  return detail::without_throwing([this] { return export_legacy(*this); });
}

namespace detail {

namespace {

// Whether `managed` carries this library's export deleter (a live or a spent export).
template <class Managed>
bool has_export_deleter(Managed* managed) noexcept {
  return __atomic_load_n(&managed->deleter, __ATOMIC_RELAXED) ==
         &ExportedTensor<Managed>::delete_export;
}

// The owner of `managed` when it is this library's live export, else null.
template <class Managed>
ExportedTensor<Managed>* own_export(Managed* managed) noexcept {
  if (!has_export_deleter(managed)) {
    return nullptr;
  }
  return static_cast<ExportedTensor<Managed>*>(
      __atomic_load_n(&managed->manager_ctx, __ATOMIC_ACQUIRE));  // null once deleted
}

// Whether `managed` is this library's export whose deleter ran: its two fields stay readable (the
// block is an export owner's for good), whatever else a later owner wrote over it.
template <class Managed>
bool spent_export(Managed* managed) noexcept {
  return has_export_deleter(managed) &&
         __atomic_load_n(&managed->manager_ctx, __ATOMIC_ACQUIRE) == nullptr;
}

}  // namespace

bool is_own_export(DLManagedTensorVersioned* managed) noexcept {
  return has_export_deleter(managed);
}

bool is_own_export(DLManagedTensor* managed) noexcept { return has_export_deleter(managed); }

bool own_export_consumed(DLManagedTensorVersioned* managed) noexcept {
  if (spent_export(managed)) {
    return true;
  }
  auto* owner = own_export(managed);
  return owner != nullptr && owner->imported.load(std::memory_order_acquire);
}

Error export_taken_error(const char* who) {
  return Error{ErrorCode::kInvalidArgument,
               std::string(who) +
                   ": this export was imported already (a DLPack tensor has one consumer, which "
                   "calls its deleter once; the caller keeps it)",
               0};
}

Error export_spent_error(const char* who) {
  return Error{ErrorCode::kInvalidArgument,
               std::string(who) +
                   ": this export's deleter ran already (a DLPack tensor has one consumer, which "
                   "calls its deleter once; the tensor it described may be gone)",
               0};
}

bool own_export_spent(DLManagedTensorVersioned* managed) noexcept { return spent_export(managed); }

bool own_export_spent(DLManagedTensor* managed) noexcept { return spent_export(managed); }

std::atomic<bool>* own_export_taken(DLManagedTensorVersioned* managed) noexcept {
  auto* owner = own_export(managed);
  return owner != nullptr ? &owner->imported : nullptr;
}

std::atomic<bool>* own_export_taken(DLManagedTensor* managed) noexcept {
  auto* owner = own_export(managed);
  return owner != nullptr ? &owner->imported : nullptr;
}

expected<DLManagedTensorVersioned*, Error> export_read_only(const Tensor& tensor) noexcept {
  const std::uint64_t flags = versioned_flags(tensor.dl_ctx()) | DLPACK_FLAG_BITMASK_READ_ONLY;
  return without_throwing([&] {
    return export_context<DLManagedTensorVersioned>(tensor.dl_ctx(), flags,
                                                    "Tensor::to_dlpack_versioned");
  });
}

}  // namespace detail

}  // namespace holoscan
