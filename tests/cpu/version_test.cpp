// Covers the version: the headers' macros agree with each other and with the linked library.
#include <gtest/gtest.h>

#include <string>

#include "holoscan/version.hpp"

namespace holoscan {
namespace {

TEST(Version, TheLinkedLibraryIsTheHeadersVersion) {
  EXPECT_STREQ(dlpack_version(), HOLOSCAN_DLPACK_VERSION_STRING);
  EXPECT_EQ(std::string(HOLOSCAN_DLPACK_VERSION_STRING),
            std::to_string(HOLOSCAN_DLPACK_VERSION_MAJOR) + "." +
                std::to_string(HOLOSCAN_DLPACK_VERSION_MINOR) + "." +
                std::to_string(HOLOSCAN_DLPACK_VERSION_PATCH));
}

}  // namespace
}  // namespace holoscan
