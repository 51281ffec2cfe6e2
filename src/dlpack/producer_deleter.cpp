// Runs a DLPack producer's deleter so that an exception thrown through it (a C function pointer,
// but a C++ producer may throw) cannot end the process: the release paths are noexcept, so an
// escaping exception would call std::terminate, inline or on the release thread.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "dlpack/producer_deleter.hpp"
#include "holoscan/deferred_release.hpp"

namespace holoscan {
namespace {

// Lines on stderr at most: a producer whose every deleter throws must not flood it.
constexpr std::uint64_t kReportedFailures = 16;

std::atomic<std::uint64_t> failures{0};

// Called from a catch block: names the exception in flight, counts it, reports it.
void contain_deleter_exception() noexcept {
  const std::uint64_t count = failures.fetch_add(1, std::memory_order_relaxed) + 1;
  if (count > kReportedFailures) {
    return;
  }
  const char* what = "an exception not derived from std::exception";
  try {
    throw;
  } catch (const std::exception& error) {
    what = error.what();
  } catch (...) {
  }
  std::fprintf(
      stderr,
      "holoscan-dlpack: a DLPack producer's deleter threw: %s; contained, what it did "
      "not free leaks%s\n",
      what,
      count == kReportedFailures ? " (further ones are only counted: failed_releases())" : "");
}

template <class Managed>
void run_deleter(Managed* managed) noexcept {
  try {
    managed->deleter(managed);
  } catch (...) {
    contain_deleter_exception();
  }
}

}  // namespace

namespace detail {

void run_producer_deleter(DLManagedTensorVersioned* managed) noexcept { run_deleter(managed); }

void run_producer_deleter(DLManagedTensor* managed) noexcept { run_deleter(managed); }

}  // namespace detail

std::uint64_t failed_releases() noexcept { return failures.load(std::memory_order_relaxed); }

}  // namespace holoscan
