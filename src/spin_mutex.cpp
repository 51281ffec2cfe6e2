#include "spin_mutex.hpp"

namespace holoscan::detail {

// Constant-initialized, so that it is valid before any static constructor and after a fork().
std::atomic<std::uint32_t> spin_mutex_sleepers{0};

}  // namespace holoscan::detail
