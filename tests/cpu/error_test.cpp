// Covers ErrorCode names, the Error defaults and make_unexpected.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "holoscan/errors.hpp"
#include "holoscan/expected.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

TEST(ErrorCodeName, NamesEveryCode) {
  EXPECT_STREQ(error_code_name(ErrorCode::kSuccess), "kSuccess");
  EXPECT_STREQ(error_code_name(ErrorCode::kFailure), "kFailure");
  EXPECT_STREQ(error_code_name(ErrorCode::kReceiveError), "kReceiveError");
  EXPECT_STREQ(error_code_name(ErrorCode::kCodecError), "kCodecError");
  EXPECT_STREQ(error_code_name(ErrorCode::kInvalidArgument), "kInvalidArgument");
  EXPECT_STREQ(error_code_name(ErrorCode::kNotFound), "kNotFound");
  EXPECT_STREQ(error_code_name(ErrorCode::kDuplicateName), "kDuplicateName");
  EXPECT_STREQ(error_code_name(ErrorCode::kNotImplemented), "kNotImplemented");
  EXPECT_STREQ(error_code_name(ErrorCode::kNotReady), "kNotReady");
  EXPECT_STREQ(error_code_name(ErrorCode::kBackpressured), "kBackpressured");
  EXPECT_STREQ(error_code_name(ErrorCode::kResourceExhausted), "kResourceExhausted");
  EXPECT_STREQ(error_code_name(ErrorCode::kClosed), "kClosed");
  EXPECT_STREQ(error_code_name(ErrorCode::kStaleEndpoint), "kStaleEndpoint");
  EXPECT_STREQ(error_code_name(ErrorCode::kIncompatible), "kIncompatible");
  EXPECT_STREQ(error_code_name(ErrorCode::kTimeout), "kTimeout");
  EXPECT_STREQ(error_code_name(ErrorCode::kCudaError), "kCudaError");
}

TEST(ErrorCodeName, HoloscanValuesAreKept) {
  EXPECT_EQ(static_cast<int>(ErrorCode::kSuccess), 0);
  EXPECT_EQ(static_cast<int>(ErrorCode::kFailure), 1);
  EXPECT_EQ(static_cast<int>(ErrorCode::kReceiveError), 2);
  EXPECT_EQ(static_cast<int>(ErrorCode::kCodecError), 3);
  EXPECT_EQ(static_cast<int>(ErrorCode::kInvalidArgument), 4);
  EXPECT_EQ(static_cast<int>(ErrorCode::kNotFound), 5);
  EXPECT_EQ(static_cast<int>(ErrorCode::kDuplicateName), 6);
  EXPECT_EQ(static_cast<int>(ErrorCode::kNotImplemented), 7);
  EXPECT_GT(static_cast<int>(ErrorCode::kCudaError), 7);
}

TEST(ErrorCodeName, OutOfRangeIsUnknown) {
  EXPECT_STREQ(error_code_name(ErrorCode::kErrorCodeCount), "kUnknown");
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

TEST(Expected, HoloscanHelpersForwardErrors) {
  const expected<int> failed = make_unexpected(Error{ErrorCode::kNotFound, "gone", 3});
  const expected<std::string> forwarded = forward_error(failed);
  ASSERT_FALSE(forwarded.has_value());
  EXPECT_EQ(forwarded.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(forwarded.error().provenance, 3u);
  expected<int> movable = make_unexpected(Error{ErrorCode::kTimeout, "late", 0});
  const expected<void> moved = forward_error(std::move(movable));
  EXPECT_EQ(moved.error().message, "late");
  const expected<int> runtime = error_detail::unexpected_runtime_error(ErrorCode::kClosed, "bye");
  EXPECT_EQ(runtime.error().code, ErrorCode::kClosed);
  EXPECT_EQ(runtime.error().message, "bye");
  const expected<int, ErrorCode> plain = make_unexpected<ErrorCode>(ErrorCode::kFailure);
  EXPECT_EQ(plain.error(), ErrorCode::kFailure);
}

TEST(RuntimeError, CarriesCodeAndText) {
  const RuntimeError from_code(ErrorCode::kInvalidArgument);
  EXPECT_EQ(from_code.code(), ErrorCode::kInvalidArgument);
  EXPECT_STREQ(from_code.what(), "kInvalidArgument");
  const RuntimeError with_text(ErrorCode::kNotFound, std::string("no such tensor"));
  EXPECT_EQ(with_text.code(), ErrorCode::kNotFound);
  EXPECT_STREQ(with_text.what(), "kNotFound: no such tensor");
  const RuntimeError with_chars(ErrorCode::kTimeout, "late");
  EXPECT_STREQ(with_chars.what(), "kTimeout: late");
  const RuntimeError plain("just text");
  EXPECT_EQ(plain.code(), ErrorCode::kFailure);
  EXPECT_STREQ(plain.what(), "just text");
}

TEST(RuntimeError, FromAnErrorRendersAnEmptyMessageAsTheCodeName) {
  const RuntimeError empty(Error{ErrorCode::kNotReady, "", 0});
  EXPECT_EQ(empty.code(), ErrorCode::kNotReady);
  EXPECT_STREQ(empty.what(), "kNotReady");
  const RuntimeError full(Error{ErrorCode::kCudaError, "cudaEventRecord failed", 35});
  EXPECT_STREQ(full.what(), "kCudaError: cudaEventRecord failed");
  EXPECT_EQ(to_string(Error{ErrorCode::kClosed, "", 0}), "kClosed");
  try {
    throw RuntimeError(Error{ErrorCode::kIncompatible, "v2", 0});
  } catch (const std::runtime_error& caught) {
    EXPECT_STREQ(caught.what(), "kIncompatible: v2");
  }
}

}  // namespace
}  // namespace holoscan
