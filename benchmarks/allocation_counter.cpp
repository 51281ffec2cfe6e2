#include "allocation_counter.hpp"

#include <cstdlib>
#include <new>

namespace {
thread_local std::uint64_t allocations = 0;
}  // namespace

namespace holoscan_bench {
std::uint64_t thread_allocations() noexcept { return allocations; }
}  // namespace holoscan_bench

#if !defined(HOLOSCAN_BENCH_COUNT_ALLOCATIONS) || HOLOSCAN_BENCH_COUNT_ALLOCATIONS
void* operator new(std::size_t bytes) {
  ++allocations;
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) {
    return p;
  }
  throw std::bad_alloc();
}
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  ++allocations;
  return std::malloc(bytes == 0 ? 1 : bytes);
}
void* operator new[](std::size_t bytes) { return operator new(bytes); }
void* operator new[](std::size_t bytes, const std::nothrow_t& tag) noexcept {
  return operator new(bytes, tag);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#endif
