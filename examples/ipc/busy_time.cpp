#include "ipc/busy_time.hpp"

#include <sys/resource.h>

#include <atomic>

namespace ipc_demo {
namespace {

std::atomic<long long> spun_ns{0};

double cpu_us_now() noexcept {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) {
    return 0;
  }
  const auto us = [](const timeval& t) { return 1e6 * static_cast<double>(t.tv_sec) + t.tv_usec; };
  return us(usage.ru_utime) + us(usage.ru_stime);
}

double spin_us_now() noexcept { return 1e-3 * static_cast<double>(spun_ns.load()); }

}  // namespace

void note_spin(std::chrono::steady_clock::duration spun) noexcept {
  spun_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(spun).count(),
                    std::memory_order_relaxed);
}

void BusyMeter::start() noexcept {
  cpu_us_ = cpu_us_now();
  spin_us_ = spin_us_now();
  started_ = true;
}

void BusyMeter::report(std::FILE* out, const char* role, long tensors) const noexcept {
  if (!started_ || tensors <= 0) {
    return;
  }
  const double cpu = cpu_us_now() - cpu_us_;
  const double spin = spin_us_now() - spin_us_;
  std::fprintf(out, "BUSY role=%s tensors=%ld cpu_us=%.0f spin_us=%.0f work_us_per_tensor=%.2f\n",
               role, tensors, cpu, spin, (cpu - spin) / static_cast<double>(tensors));
  std::fflush(out);
}

}  // namespace ipc_demo
