#include "dlpack/context_recycler.hpp"

#include <new>

#include "holoscan/tensor.hpp"
#include "dlpack/context_access.hpp"
#include "dlpack/recycler.hpp"

namespace holoscan::detail {
namespace {

// What the context cache frees for good.
struct ContextKind {
  static void release(void* context) noexcept {
    delete static_cast<DLManagedTensorContext*>(context);
  }
};

using ContextCache = PointerCache<ContextKind>;

// Room for the largest shape, so that filling a kept context never allocates.
constexpr auto kRoom = static_cast<std::size_t>(kMaxTensorDims);

// A context whose vectors were replaced through its public members gets the room back here.
bool has_room(DLManagedTensorContext& context) noexcept {
  if (context.dl_shape.capacity() >= kRoom && context.dl_strides.capacity() >= kRoom) {
    return true;
  }
  try {
    context.dl_shape.reserve(kRoom);
    context.dl_strides.reserve(kRoom);
  } catch (...) {
    return false;
  }
  return true;
}

}  // namespace

DLManagedTensorContext* take_context() noexcept {
  auto* context = static_cast<DLManagedTensorContext*>(ContextCache::take());
  if (context == nullptr) {
    context = new (std::nothrow) DLManagedTensorContext();
  }
  if (context != nullptr && !has_room(*context)) {
    delete context;
    return nullptr;
  }
  return context;
}

void give_context(DLManagedTensorContext* context) noexcept {
  // First: dropping the memory may run a producer's deleter, which may import or drop more.
  context->memory_reference.reset();
  context->tensor = DLManagedTensorVersioned{};
  context->tensor.version =  // as a new context's
      DLPackVersion{HOLOSCAN_DLPACK_IMPL_VERSION_MAJOR, HOLOSCAN_DLPACK_IMPL_VERSION_MINOR};
  // The vectors keep their size: the next import of the same shape need not resize them.
  ContextAccess::forget_checked(*context);
  ContextAccess::forget_memory_lives_in(*context);  // the next user marks its own reference
  ContextAccess::restore_writable(*context);
  // One grown by hand through its public vectors goes back to the heap, room and all: the lists
  // bound how many contexts are kept, this bounds what each one holds.
  if (context->dl_shape.capacity() > kRoom || context->dl_strides.capacity() > kRoom) {
    delete context;
    return;
  }
  ContextCache::give(context);
}

std::shared_ptr<DLManagedTensorContext> share_recycled(DLManagedTensorContext* context) {
  // Should the control block not fit, the deleter gives the context back before the throw.
  return std::shared_ptr<DLManagedTensorContext>(
      context, [](DLManagedTensorContext* done) noexcept { give_context(done); },
      RecyclingAllocator<DLManagedTensorContext>{});
}

}  // namespace holoscan::detail
