#pragma once
// The UCX test binary replaces getaddrinfo (slow_resolver.cpp: it calls the C library's own
// through dlsym(RTLD_NEXT)) so that a test can make the resolution of one name take as long as a
// resolver that does not answer, which nothing on a machine without a network can do on demand.
#include <chrono>

namespace holoscan::test {

/** @brief A name whose resolution takes the armed time, then fails (EAI_NONAME). */
inline constexpr const char* kSlowName = "slow-to-resolve.invalid";

/** @brief While alive, each resolution of kSlowName in this process takes `delay`. */
class SlowResolver {
 public:
  /** @brief Arms the delay. */
  explicit SlowResolver(std::chrono::milliseconds delay) noexcept;
  /** @brief Disarms it. */
  ~SlowResolver();
  SlowResolver(const SlowResolver&) = delete;
  SlowResolver& operator=(const SlowResolver&) = delete;
  /** @brief Resolutions of kSlowName under way now. */
  int resolving() const noexcept;
};

}  // namespace holoscan::test
