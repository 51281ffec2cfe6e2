#include "holoscan/version.hpp"

namespace holoscan {

const char* dlpack_version() noexcept { return HOLOSCAN_DLPACK_VERSION_STRING; }

}  // namespace holoscan
