// The text and code of UCX's failures as the library reports them: UCX's own text, the status's
// name where UCX's header gives one, and its number.
#include <gtest/gtest.h>

#include <string>

#include "ucx/ucx_error.hpp"

namespace holoscan::test {
namespace {

TEST(UcxErrorText, ANamedStatusReadsTextNameAndNumber) {
  EXPECT_EQ(ucx::detail::describe_status(UCS_ERR_IO_ERROR),
            std::string(ucs_status_string(UCS_ERR_IO_ERROR)) + ", UCS_ERR_IO_ERROR (-3)");
  EXPECT_EQ(ucx::detail::describe_status(UCS_ERR_CONNECTION_RESET),
            std::string(ucs_status_string(UCS_ERR_CONNECTION_RESET)) +
                ", UCS_ERR_CONNECTION_RESET (-25)");
}

// A value UCX's header names only as part of a range, or not at all, reads without a name (it
// once read "Unknown error -41, status (-41)").
TEST(UcxErrorText, AStatusWithoutANameReadsTextAndNumberOnly) {
  const auto unnamed = static_cast<ucs_status_t>(-41);
  ASSERT_EQ(ucx::detail::status_name(unnamed), nullptr);
  EXPECT_EQ(ucx::detail::describe_status(unnamed),
            std::string(ucs_status_string(unnamed)) + " (-41)");
}

TEST(UcxErrorText, AnErrorNamesWhoTheCallAndTheStatusWithItsCode) {
  const Error reset =
      ucx::detail::ucx_error("ucx worker", "ucp_ep_create", UCS_ERR_CONNECTION_RESET);
  EXPECT_EQ(reset.code, ErrorCode::kClosed);
  EXPECT_EQ(reset.message, "ucx worker: ucp_ep_create failed: " +
                               ucx::detail::describe_status(UCS_ERR_CONNECTION_RESET));
  EXPECT_EQ(ucx::detail::ucx_error("w", "c", UCS_ERR_TIMED_OUT).code, ErrorCode::kTimeout);
  EXPECT_EQ(ucx::detail::ucx_error("w", "c", UCS_ERR_NO_MEMORY).code,
            ErrorCode::kResourceExhausted);
  EXPECT_EQ(ucx::detail::ucx_error("w", "c", UCS_ERR_UNSUPPORTED).code, ErrorCode::kNotImplemented);
  EXPECT_EQ(ucx::detail::ucx_error("w", "c", UCS_ERR_INVALID_ADDR).code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(ucx::detail::ucx_error("w", "c", UCS_ERR_IO_ERROR).code, ErrorCode::kClosed);
  EXPECT_EQ(ucx::detail::ucx_error("w", "c", UCS_ERR_NO_ELEM).code, ErrorCode::kFailure);
}

}  // namespace
}  // namespace holoscan::test
