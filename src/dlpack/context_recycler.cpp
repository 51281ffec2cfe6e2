#include "dlpack/context_recycler.hpp"

#include <mutex>
#include <new>
#include <vector>

#include "dlpack/context_access.hpp"
#include "dlpack/recycler.hpp"

namespace holoscan::detail {
namespace {

class ContextFreeList {
 public:
  static constexpr std::size_t kKeep = 4096;

  static ContextFreeList& instance() noexcept {
    static auto* list = new ContextFreeList();  // leaked: contexts may come back at exit
    return *list;
  }

  DLManagedTensorContext* take() noexcept {
#if HOLOSCAN_DLPACK_RECYCLE
    {
      std::lock_guard<SpinMutex> lock(mutex_);
      if (!free_.empty()) {
        DLManagedTensorContext* context = free_.back();
        free_.pop_back();
        return context;
      }
    }
#endif
    return new (std::nothrow) DLManagedTensorContext();
  }

  void give(DLManagedTensorContext* context) noexcept {
    // Outside the lock: dropping the memory may run a producer's deleter, which may drop more.
    context->memory_reference.reset();
#if HOLOSCAN_DLPACK_RECYCLE
    context->tensor = DLManagedTensorVersioned{};
    context->dl_shape.clear();
    context->dl_strides.clear();
    ContextAccess::restore_writable(*context);
    {
      std::lock_guard<SpinMutex> lock(mutex_);
      if (free_.size() < free_.capacity()) {  // within the room reserved once: no allocation
        free_.push_back(context);
        return;
      }
    }
#endif
    delete context;
  }

 private:
  ContextFreeList() {
    try {
      free_.reserve(kKeep);
    } catch (...) {
      // Nothing is kept then: every context goes back to the heap.
    }
  }

  SpinMutex mutex_;
  std::vector<DLManagedTensorContext*> free_;
};

}  // namespace

std::shared_ptr<DLManagedTensorContext> make_recycled_context() {
  DLManagedTensorContext* context = ContextFreeList::instance().take();
  if (context == nullptr) {
    throw std::bad_alloc();
  }
  // Should the control block not fit, the deleter gives the context back before the throw.
  return std::shared_ptr<DLManagedTensorContext>(
      context, [](DLManagedTensorContext* done) { ContextFreeList::instance().give(done); },
      RecyclingAllocator<DLManagedTensorContext>{});
}

}  // namespace holoscan::detail
