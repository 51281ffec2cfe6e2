// Every replaceable form of operator new and delete, so that no allocation escapes the hooks and
// every pair matches (all of them on malloc and free).
#include "support/allocation_hooks.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace {

// Constant-initialized thread_locals: safe to touch from operator new at any time.
thread_local bool t_counting = false;
thread_local std::uint64_t t_new_calls = 0;
thread_local std::uint64_t t_skip = 0;
thread_local std::uint64_t t_to_fail = 0;
thread_local std::uint64_t t_failed = 0;

// Whether this call is one the test made fail.
bool fails_now() noexcept {
  if (t_counting) {
    ++t_new_calls;
  }
  if (t_to_fail == 0 || holoscan::test::allocations_never_fail_depth > 0) {
    return false;
  }
  if (t_skip > 0) {
    --t_skip;
    return false;
  }
  --t_to_fail;
  ++t_failed;
  return true;
}

void* hooked_malloc(std::size_t size) noexcept {
  return fails_now() ? nullptr : std::malloc(size == 0 ? 1 : size);
}

void* hooked_aligned(std::size_t size, std::align_val_t alignment) noexcept {
  if (fails_now()) {
    return nullptr;
  }
  void* p = nullptr;
  const std::size_t align = std::max(static_cast<std::size_t>(alignment), sizeof(void*));
  return posix_memalign(&p, align, size == 0 ? 1 : size) == 0 ? p : nullptr;
}

void* or_throw(void* p) {
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  return p;
}

}  // namespace

void* operator new(std::size_t size) { return or_throw(hooked_malloc(size)); }
void* operator new[](std::size_t size) { return or_throw(hooked_malloc(size)); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return hooked_malloc(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return hooked_malloc(size);
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  return or_throw(hooked_aligned(size, alignment));
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  return or_throw(hooked_aligned(size, alignment));
}
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return hooked_aligned(size, alignment);
}
void* operator new[](std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return hooked_aligned(size, alignment);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace holoscan::test {

NewCounter::NewCounter() noexcept {
  t_new_calls = 0;
  t_counting = true;
}

NewCounter::~NewCounter() { t_counting = false; }

std::uint64_t NewCounter::calls() const noexcept { return t_new_calls; }

FailingAllocations::FailingAllocations(std::uint64_t skip, std::uint64_t count) noexcept {
  t_skip = skip;
  t_failed = 0;
  t_to_fail = count;
}

FailingAllocations::~FailingAllocations() {
  t_to_fail = 0;
  t_skip = 0;
}

std::uint64_t FailingAllocations::failed() const noexcept { return t_failed; }

}  // namespace holoscan::test
