// Covers ErrorCode names, the Error defaults and make_unexpected.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "holoscan/expected.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

TEST(ErrorCodeName, NamesEveryCode) {
  EXPECT_STREQ(error_code_name(ErrorCode::kSuccess), "kSuccess");
  EXPECT_STREQ(error_code_name(ErrorCode::kFailure), "kFailure");
  EXPECT_STREQ(error_code_name(ErrorCode::kInvalidArgument), "kInvalidArgument");
  EXPECT_STREQ(error_code_name(ErrorCode::kNotImplemented), "kNotImplemented");
  EXPECT_STREQ(error_code_name(ErrorCode::kNotReady), "kNotReady");
  EXPECT_STREQ(error_code_name(ErrorCode::kResourceExhausted), "kResourceExhausted");
  EXPECT_STREQ(error_code_name(ErrorCode::kCudaError), "kCudaError");
}

TEST(ErrorCodeName, OutOfRangeIsUnknown) {
  EXPECT_STREQ(error_code_name(static_cast<ErrorCode>(7)), "kUnknown");
  EXPECT_STREQ(error_code_name(static_cast<ErrorCode>(-1)), "kUnknown");
  EXPECT_STREQ(error_code_name(static_cast<ErrorCode>(INT32_MAX)), "kUnknown");
}

TEST(Error, DefaultIsFailureWithEmptyMessage) {
  const Error error;
  EXPECT_EQ(error.code, ErrorCode::kFailure);
  EXPECT_TRUE(error.message.empty());
  EXPECT_EQ(error.provenance, 0u);
}

TEST(MakeUnexpected, CarriesCodeMessageAndProvenance) {
  const expected<int> result = make_unexpected(ErrorCode::kCudaError, "cudaEventRecord failed", 35);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kCudaError);
  EXPECT_EQ(result.error().message, "cudaEventRecord failed");
  EXPECT_EQ(result.error().provenance, 35u);
}

TEST(MakeUnexpected, ProvenanceDefaultsToZero) {
  const expected<void> result = make_unexpected(ErrorCode::kNotReady, "");
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kNotReady);
  EXPECT_TRUE(result.error().message.empty());
  EXPECT_EQ(result.error().provenance, 0u);
}

TEST(Expected, HoldsAValue) {
  const expected<std::string> result = std::string("ok");
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(*result, "ok");
}

TEST(Expected, UnexpectedDeducesFromAnError) {
  const expected<int> direct = unexpected(Error{ErrorCode::kNotReady, "later", 0});
  ASSERT_FALSE(direct.has_value());
  EXPECT_EQ(direct.error().code, ErrorCode::kNotReady);
  const expected<int> wrapped = make_unexpected(Error{ErrorCode::kFailure, "why", 7});
  ASSERT_FALSE(wrapped.has_value());
  EXPECT_EQ(wrapped.error().provenance, 7u);
  const expected<int> in_place(unexpect, Error{ErrorCode::kInvalidArgument, "field", 0});
  EXPECT_EQ(in_place.error().message, "field");
}

}  // namespace
}  // namespace holoscan
