#pragma once
// What a DLManagedTensorContext keeps privately: its access authority, read and narrowed by the
// library (imports, and a view flagged READ_ONLY once seen, narrow it to read-only for good; a
// pool gives its block's context writer authority back when it hands the block out anew), and a
// copy of a view the library checked, which lets an export skip the checks while nothing in the
// view has changed.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <typeinfo>

#include "holoscan/dlpack_context.hpp"
#include "holoscan/stream_tracked_reference.hpp"
#include "stream/reference_holds.hpp"

namespace holoscan::detail {

/** @brief Read and narrow the access authority of a context; remember the views it checked. */
struct HOLOSCAN_DLPACK_ABI ContextAccess {
  /** @brief Dimensions up to which a checked view is remembered (an export's inline room too). */
  static constexpr std::int32_t kCheckedDims = DLManagedTensorContext::kCheckedDims;

  /** @brief Whether the context's memory may only be read through it. */
  static bool read_only(const DLManagedTensorContext& context) noexcept {
    return context.read_only_.load(std::memory_order_acquire);
  }
  /**
   * @brief Whether the context's memory may only be read through it: narrowed already, or its
   *        view's READ_ONLY flag set now, which narrows it for good (clearing the flag later
   *        never widens access again).
   */
  static bool read_only_once_flagged(DLManagedTensorContext& context) noexcept {
    if (read_only(context)) {
      return true;
    }
    if ((context.tensor.flags & DLPACK_FLAG_BITMASK_READ_ONLY) == 0) {
      return false;
    }
    narrow_to_read_only(context);
    return true;
  }
  /** @brief Narrows the context to read-only authority (imports); never widened again. */
  static void narrow_to_read_only(DLManagedTensorContext& context) noexcept {
    context.read_only_.store(true, std::memory_order_release);
  }
  /**
   * @brief Records that the library made `context` and that its memory lives exactly as long as
   *        its memory reference, the one it holds now (the context's own deleter frees none of
   *        it while that reference is in place).
   */
  static void mark_memory_lives_in_reference(DLManagedTensorContext& context) noexcept {
    context.memory_lives_in_ = context.memory_reference.get();
    context.holds_owner_type_ = nullptr;
  }
  /**
   * @brief As above, for a reference that lives by its holds (ReferenceHolds::live_by_holds):
   *        an export may hold it alone, with a hold instead of a shared_ptr copy and a claim.
   */
  static void mark_memory_lives_by_holds(DLManagedTensorContext& context) noexcept {
    context.memory_lives_in_ = context.memory_reference.get();
    context.holds_owner_type_ =
        context.memory_lives_in_ != nullptr ? &typeid(*context.memory_lives_in_) : nullptr;
  }
  /**
   * @brief As above, for a context whose memory reference is `reference`, which lives by its
   *        holds, whenever it is lent (a pool block's, set anew at each allocation).
   */
  static void mark_memory_lives_by_holds_in(DLManagedTensorContext& context,
                                            const StreamTrackedReference& reference) noexcept {
    context.memory_lives_in_ = &reference;
    context.holds_owner_type_ = &typeid(reference);
  }
  /** @brief Forgets both marks above, for a context about to be reused. */
  static void forget_memory_lives_in(DLManagedTensorContext& context) noexcept {
    context.memory_lives_in_ = nullptr;
    context.holds_owner_type_ = nullptr;
  }
  /**
   * @brief Whether holding the context's memory reference holds its memory: false for contexts
   *        made by others (their deleters may own memory too), and for one whose reference a
   *        holder replaced (a pool block's memory is then kept by the context alone).
   */
  static bool memory_lives_in_reference(const DLManagedTensorContext& context) noexcept {
    const TensorMemoryReference* reference = context.memory_reference.get();
    return reference != nullptr && reference == context.memory_lives_in_;
  }
  /**
   * @brief The context's memory reference when it is the one the library made and it lives by
   *        its holds (mark_memory_lives_by_holds), else null.
   */
  static StreamTrackedReference* memory_held_by_holds(
      const DLManagedTensorContext& context) noexcept {
    if (context.holds_owner_type_ == nullptr || !memory_lives_in_reference(context)) {
      return nullptr;
    }
    // The object there now may be another one than the owner marked, at the owner's address once
    // freed (a holder replaced the reference, then put a new one in place): its class tells.
    // Equal classes compare their type_info's addresses first (a string comparison only when not).
    TensorMemoryReference* reference = context.memory_reference.get();
    if (typeid(*reference) != *context.holds_owner_type_) {
      return nullptr;
    }
    // Only owners of StreamTrackedReference classes are marked so (tensor_import.cpp, a pool,
    // make_tensor.cpp). One of the class a caller built itself there lives by no holds.
    auto* tracked = static_cast<StreamTrackedReference*>(reference);
    return ReferenceHolds::lives_by_holds(*tracked) ? tracked : nullptr;
  }
  /**
   * @brief Claims the context's one mutable DLPack export (Holoscan 5.0's exclusive access
   *        claim); false when another is alive.
   */
  static bool begin_mutable_export(DLManagedTensorContext& context) noexcept {
    bool alive = false;
    return context.mutable_export_.compare_exchange_strong(alive, true, std::memory_order_acquire,
                                                           std::memory_order_relaxed);
  }
  /** @brief Ends the claim begin_mutable_export() took (the export's deleter ran). */
  static void end_mutable_export(DLManagedTensorContext& context) noexcept {
    context.mutable_export_.store(false, std::memory_order_release);
  }
  /** @brief Whether a mutable DLPack export of the context is alive. */
  static bool has_mutable_export(const DLManagedTensorContext& context) noexcept {
    return context.mutable_export_.load(std::memory_order_acquire);
  }
  /** @brief Gives a context that a pool hands out anew its writer authority back. */
  static void restore_writable(DLManagedTensorContext& context) noexcept {
    context.read_only_.store(false, std::memory_order_release);
  }
  /**
   * @brief Records that the view met the layout rules: a copy of its ndim, dtype, flags, first
   *        element's address, and every extent and stride, for views of up to kCheckedDims
   *        dimensions with explicit strides (assign_view() leaves them so); others are not
   *        remembered.
   */
  static void mark_checked(DLManagedTensorContext& context) noexcept {
    const DLTensor& view = context.tensor.dl_tensor;
    const std::int32_t ndim = view.ndim;
    context.checked_.header = 0;
    if (ndim < 0 || ndim > kCheckedDims ||
        (ndim > 0 && (view.shape == nullptr || view.strides == nullptr))) {
      return;
    }
    for (std::int32_t i = 0; i < ndim; ++i) {
      context.checked_.dims[i] = view.shape[i];
      context.checked_.dims[ndim + i] = view.strides[i];
    }
    context.checked_.flags = context.tensor.flags;
    context.checked_.first = first_address(view);
    context.checked_.header = header_of(view);
  }
  /** @brief Forgets mark_checked(), for a context about to be reused. */
  static void forget_checked(DLManagedTensorContext& context) noexcept {
    context.checked_.header = 0;
  }
  /**
   * @brief Copies the extents and strides into `dims` (room for 2 * kCheckedDims) and says
   *        whether the view is exactly the one mark_checked() recorded: the same ndim, dtype and
   *        flags, and every value copied out equal to the one checked (the values compared are
   *        the copies, so what is handed out is what was compared). False: `dims` holds nothing
   *        of use and the view must be checked again; any value written in place since, alone
   *        or with others, is caught.
   */
  static bool copy_if_checked(const DLManagedTensorContext& context, std::int64_t* dims) noexcept {
    const DLTensor& view = context.tensor.dl_tensor;
    const std::int32_t ndim = view.ndim;
    if (static_cast<std::uint32_t>(ndim) > kCheckedDims ||
        context.checked_.header != header_of(view) ||
        context.checked_.flags != context.tensor.flags ||
        context.checked_.first != first_address(view)) {
      return false;
    }
    if (ndim == 0) {
      return true;
    }
    const std::int64_t* shape = view.shape;
    const std::int64_t* strides = view.strides;
    if (shape == nullptr || strides == nullptr) {
      return false;
    }
    const std::int64_t* checked = context.checked_.dims;
    switch (ndim) {
      case 1:
        return copy_equal<1>(shape, strides, checked, dims);
      case 2:
        return copy_equal<2>(shape, strides, checked, dims);
      case 3:
        return copy_equal<3>(shape, strides, checked, dims);
      case 4:
        return copy_equal<4>(shape, strides, checked, dims);
      case 5:
        return copy_equal<5>(shape, strides, checked, dims);
      default:
        return copy_equal<6>(shape, strides, checked, dims);  // ndim is in [1, 6] here
    }
  }

 private:
  static_assert(kCheckedDims == 6, "copy_if_checked has a case for each ndim up to kCheckedDims");

  // The first element's address, data + byte_offset (wrapping: only compared): the strides'
  // span was checked from it, so a data pointer written by hand is checked again.
  static std::uintptr_t first_address(const DLTensor& view) noexcept {
    return reinterpret_cast<std::uintptr_t>(view.data) + view.byte_offset;
  }

  // Copies kNdim extents and strides into `dims`, then compares the copies with `checked`. A
  // fixed size keeps the copies a few moves (a counted loop becomes calls to memmove).
  template <std::int32_t kNdim>
  static bool copy_equal(const std::int64_t* shape, const std::int64_t* strides,
                         const std::int64_t* checked, std::int64_t* dims) noexcept {
    std::memcpy(dims, shape, sizeof(std::int64_t) * kNdim);
    std::memcpy(dims + kNdim, strides, sizeof(std::int64_t) * kNdim);
    std::uint64_t differ = 0;
    for (std::int32_t i = 0; i < 2 * kNdim; ++i) {
      differ |= static_cast<std::uint64_t>(dims[i] ^ checked[i]);
    }
    return differ == 0;
  }

  // ndim (in [0, kCheckedDims] wherever it is asked) and dtype, exactly, with a bit that says a
  // view was recorded (0: none).
  static std::uint64_t header_of(const DLTensor& view) noexcept {
    constexpr std::uint64_t kRecorded = std::uint64_t{1} << 63;
    const std::uint64_t dtype = std::uint64_t{view.dtype.code} |
                                std::uint64_t{view.dtype.bits} << 8 |
                                std::uint64_t{view.dtype.lanes} << 16;
    return kRecorded | std::uint64_t{static_cast<std::uint32_t>(view.ndim)} << 32 | dtype;
  }
};

}  // namespace holoscan::detail
