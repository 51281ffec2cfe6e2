// Runs a DLPack producer's deleter so that an exception thrown through it (a C function pointer,
// but a C++ producer may throw) cannot end the process: the release paths are noexcept, so an
// escaping exception would call std::terminate, inline or on the release thread.
#include <cxxabi.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "dlpack/producer_deleter.hpp"
#include "holoscan/deferred_release.hpp"

namespace holoscan {
namespace {

// Lines on stderr at most: a producer whose every deleter fails must not flood it.
constexpr std::uint64_t kReportedFailures = 16;

std::atomic<std::uint64_t> failures{0};

// A thread ended inside the deleter unwinds by force: swallowed, that unwinding aborts the
// process; let through, it must meet a caller that stops it (else std::terminate).
template <class Managed>
void run_deleter(Managed* managed) {
  try {
    managed->deleter(managed);
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (...) {
    detail::report_release_exception("a DLPack producer's deleter threw");
  }
}

}  // namespace

namespace detail {

void run_producer_deleter(DLManagedTensorVersioned* managed) noexcept { run_deleter(managed); }

void run_producer_deleter(DLManagedTensor* managed) noexcept { run_deleter(managed); }

void run_producer_deleter_letting_threads_end(DLManagedTensorVersioned* managed) {
  run_deleter(managed);
}

void run_producer_deleter_letting_threads_end(DLManagedTensor* managed) { run_deleter(managed); }

namespace {

// Counts one in failed_releases() and prints "holoscan-dlpack: <failure>: <why>; <outcome>" for
// the first kReportedFailures.
void report(const char* failure, const char* why, const char* outcome) noexcept {
  const std::uint64_t count = failures.fetch_add(1, std::memory_order_relaxed) + 1;
  if (count > kReportedFailures) {
    return;
  }
  std::fprintf(
      stderr, "holoscan-dlpack: %s: %s; %s%s\n", failure, why, outcome,
      count == kReportedFailures ? " (further ones are only counted: failed_releases())" : "");
}

}  // namespace

void report_failed_release(const char* failure, const char* why) noexcept {
  report(failure, why, "contained, what it did not free leaks");
}

void report_ignored_release(const char* failure, const char* why) noexcept {
  report(failure, why, "ignored");
}

void report_release_exception(const char* failure) noexcept {
  const char* what = "an exception not derived from std::exception";
  try {
    throw;
  } catch (const std::exception& error) {
    what = error.what();
  } catch (...) {  // NOLINT(bugprone-empty-catch): `what` already says so
  }
  report_failed_release(failure, what);
}

}  // namespace detail

std::uint64_t failed_releases() noexcept { return failures.load(std::memory_order_relaxed); }

}  // namespace holoscan
