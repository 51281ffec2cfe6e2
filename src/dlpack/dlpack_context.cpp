#include "holoscan/dlpack_context.hpp"

#include "holoscan/dlpack_utils.hpp"

#include <cstdint>
#include <vector>

namespace holoscan {
namespace {

// Where `pointer` lies at the start of `from` or inside its elements: the same place in `to` (the
// vectors are of one size), else `pointer` itself. Compared as addresses, which is defined for
// unrelated pointers.
std::int64_t* same_place(std::int64_t* pointer, const std::vector<std::int64_t>& from,
                         std::vector<std::int64_t>& to) {
  const auto at = reinterpret_cast<std::uintptr_t>(pointer);
  const auto begin = reinterpret_cast<std::uintptr_t>(from.data());
  const std::uintptr_t end = begin + from.size() * sizeof(std::int64_t);
  if (pointer == nullptr || (at != begin && (at < begin || at >= end))) {
    return pointer;
  }
  return reinterpret_cast<std::int64_t*>(reinterpret_cast<unsigned char*>(to.data()) +
                                         (at - begin));
}

// Re-points the copy's view wherever the source's pointed into the source context's own storage
// (its start, or any element of either vector: a hand-written sub-view, or strides kept in
// dl_shape), so that a copied context never reads through the original's vectors.
void point_at_own_storage(const DLManagedTensorContext& source, DLManagedTensorContext& copy) {
  DLTensor& view = copy.tensor.dl_tensor;
  for (std::int64_t** field : {&view.shape, &view.strides}) {
    std::int64_t* const original = *field;
    *field = same_place(original, source.dl_shape, copy.dl_shape);
    if (*field == original) {
      *field = same_place(original, source.dl_strides, copy.dl_strides);
    }
  }
}

}  // namespace

// Out of line, as Holoscan 5.0's: the version is the library's build's, whatever DLPack headers the
// caller was compiled with.
DLManagedTensorContext::DLManagedTensorContext() noexcept {
  tensor.version =
      DLPackVersion{HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR};
}

DLManagedTensorContext::DLManagedTensorContext(const DLManagedTensorContext& other)
    : tensor(other.tensor),
      memory_reference(other.memory_reference),
      dl_shape(other.dl_shape),
      dl_strides(other.dl_strides),
      read_only_(other.read_only_.load(std::memory_order_acquire)),
      checked_(other.checked_) {
  // memory_lives_in_ stays null: the copy's owner says what keeps its memory.
  point_at_own_storage(other, *this);
}

DLManagedTensorContext& DLManagedTensorContext::operator=(const DLManagedTensorContext& other) {
  if (this != &other) {
    // The room first, apart, so that nothing below allocates: refused half-way, this view was
    // left pointing into `other`'s vectors or at this context's freed room. Refused here,
    // nothing has changed; the old room is freed only once the view points at the new one.
    std::vector<std::int64_t> shape_room;
    std::vector<std::int64_t> strides_room;
    if (dl_shape.capacity() < other.dl_shape.size()) {
      shape_room.reserve(other.dl_shape.size());
    }
    if (dl_strides.capacity() < other.dl_strides.size()) {
      strides_room.reserve(other.dl_strides.size());
    }
    if (shape_room.capacity() != 0) {
      dl_shape.swap(shape_room);
    }
    if (strides_room.capacity() != 0) {
      dl_strides.swap(strides_room);
    }
    tensor = other.tensor;
    memory_reference = other.memory_reference;
    dl_shape = other.dl_shape;  // within the room: no allocation
    dl_strides = other.dl_strides;
    // Authority only narrows: a read-only context (an import's) assigned a writable one keeps
    // its Tensors read-only, or assignment would widen access to the memory it had.
    if (other.read_only_.load(std::memory_order_acquire)) {
      read_only_.store(true, std::memory_order_release);
    }
    checked_ = other.checked_;   // a record of values, which holds wherever the view points
    memory_lives_in_ = nullptr;  // the assigner says what keeps the memory now
    holds_owner_type_ = nullptr;
    point_at_own_storage(other, *this);
  }
  return *this;
}

}  // namespace holoscan
