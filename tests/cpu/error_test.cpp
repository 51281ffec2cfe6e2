// Covers ErrorCode names, the Error defaults and make_unexpected.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "holoscan/errors.hpp"
#include "holoscan/expected.hpp"
#include "support/gtest_printers.hpp"

namespace holoscan {
namespace {

// Holoscan 5.0's table, value by value, as its binary numbers and names them.
static_assert(static_cast<int>(ErrorCode::kSuccess) == 0);
static_assert(static_cast<int>(ErrorCode::kFailure) == 1);
static_assert(static_cast<int>(ErrorCode::kReceiveError) == 2);
static_assert(static_cast<int>(ErrorCode::kCodecError) == 3);
static_assert(static_cast<int>(ErrorCode::kInvalidArgument) == 4);
static_assert(static_cast<int>(ErrorCode::kNotFound) == 5);
static_assert(static_cast<int>(ErrorCode::kDuplicateName) == 6);
static_assert(static_cast<int>(ErrorCode::kNotImplemented) == 7);
static_assert(static_cast<int>(ErrorCode::kBackpressured) == 8);
static_assert(static_cast<int>(ErrorCode::kNotReady) == 9);
static_assert(static_cast<int>(ErrorCode::kStaleEndpoint) == 10);
static_assert(static_cast<int>(ErrorCode::kClosed) == 11);
static_assert(static_cast<int>(ErrorCode::kResourceExhausted) == 12);
static_assert(static_cast<int>(ErrorCode::kTimeout) == 13);
static_assert(static_cast<int>(ErrorCode::kPermissionDenied) == 14);
static_assert(static_cast<int>(ErrorCode::kInterrupted) == 15);
static_assert(static_cast<int>(ErrorCode::kProtocolError) == 16);
static_assert(static_cast<int>(ErrorCode::kIncompatible) == 17);
static_assert(static_cast<int>(ErrorCode::kInputEmpty) == 18);
static_assert(static_cast<int>(ErrorCode::kInputNotSelected) == 19);
static_assert(static_cast<int>(ErrorCode::kInputUndeclared) == 20);
static_assert(static_cast<int>(ErrorCode::kInputSelectionCardinalityMismatch) == 21);
static_assert(static_cast<int>(ErrorCode::kPublicationIndeterminate) == 22);
static_assert(static_cast<int>(ErrorCode::kNotSupported) == 23);
static_assert(static_cast<int>(ErrorCode::kLifecycleInvalidRestartStage) == 24);
static_assert(static_cast<int>(ErrorCode::kLifecycleTransactionsDisabled) == 25);
static_assert(static_cast<int>(ErrorCode::kStaleOperatorRef) == 26);
static_assert(static_cast<int>(ErrorCode::kCrossSessionOperatorRef) == 27);
static_assert(static_cast<int>(ErrorCode::kLifecycleRestartUnauthorized) == 28);
static_assert(static_cast<int>(ErrorCode::kLifecycleRestartQueueFull) == 29);
static_assert(static_cast<int>(ErrorCode::kLifecycleRestartUnsupportedInProfile) == 30);
static_assert(static_cast<int>(ErrorCode::kLifecycleInvalidCallingContext) == 31);
static_assert(static_cast<int>(ErrorCode::kLifecycleRunState) == 32);
static_assert(static_cast<int>(ErrorCode::kLifecycleQuiesceFailed) == 33);
static_assert(static_cast<int>(ErrorCode::kLifecycleStageFailed) == 34);
static_assert(static_cast<int>(ErrorCode::kLifecycleRollbackFailed) == 35);
static_assert(static_cast<int>(ErrorCode::kPublicationPartial) == 36);
static_assert(static_cast<int>(ErrorCode::kRateBindingInvalid) == 37);
static_assert(static_cast<int>(ErrorCode::kRateBindingAboveMaximum) == 38);
static_assert(static_cast<int>(ErrorCode::kRateBindingConflict) == 39);
static_assert(static_cast<int>(ErrorCode::kArithmeticOverflow) == 40);
static_assert(static_cast<int>(ErrorCode::kPreparedStorageInvalid) == 41);
static_assert(std::is_same_v<decltype(error_code_name(ErrorCode::kSuccess)), std::string_view>);

TEST(ErrorCodeName, NamesEveryCodeAsHoloscanDoes) {
  const std::pair<ErrorCode, const char*> table[] = {
    {ErrorCode::kSuccess, "kSuccess"},
    {ErrorCode::kFailure, "kFailure"},
    {ErrorCode::kReceiveError, "kReceiveError"},
    {ErrorCode::kCodecError, "kCodecError"},
    {ErrorCode::kInvalidArgument, "kInvalidArgument"},
    {ErrorCode::kNotFound, "kNotFound"},
    {ErrorCode::kDuplicateName, "kDuplicateName"},
    {ErrorCode::kNotImplemented, "kNotImplemented"},
    {ErrorCode::kBackpressured, "kBackpressured"},
    {ErrorCode::kNotReady, "kNotReady"},
    {ErrorCode::kStaleEndpoint, "kStaleEndpoint"},
    {ErrorCode::kClosed, "kClosed"},
    {ErrorCode::kResourceExhausted, "kResourceExhausted"},
    {ErrorCode::kTimeout, "kTimeout"},
    {ErrorCode::kPermissionDenied, "kPermissionDenied"},
    {ErrorCode::kInterrupted, "kInterrupted"},
    {ErrorCode::kProtocolError, "kProtocolError"},
    {ErrorCode::kIncompatible, "kIncompatible"},
    {ErrorCode::kInputEmpty, "kInputEmpty"},
    {ErrorCode::kInputNotSelected, "kInputNotSelected"},
    {ErrorCode::kInputUndeclared, "kInputUndeclared"},
    {ErrorCode::kInputSelectionCardinalityMismatch, "kInputSelectionCardinalityMismatch"},
    {ErrorCode::kPublicationIndeterminate, "kPublicationIndeterminate"},
    {ErrorCode::kNotSupported, "kNotSupported"},
    {ErrorCode::kLifecycleInvalidRestartStage, "kLifecycleInvalidRestartStage"},
    {ErrorCode::kLifecycleTransactionsDisabled, "kLifecycleTransactionsDisabled"},
    {ErrorCode::kStaleOperatorRef, "kStaleOperatorRef"},
    {ErrorCode::kCrossSessionOperatorRef, "kCrossSessionOperatorRef"},
    {ErrorCode::kLifecycleRestartUnauthorized, "kLifecycleRestartUnauthorized"},
    {ErrorCode::kLifecycleRestartQueueFull, "kLifecycleRestartQueueFull"},
    {ErrorCode::kLifecycleRestartUnsupportedInProfile, "kLifecycleRestartUnsupportedInProfile"},
    {ErrorCode::kLifecycleInvalidCallingContext, "kLifecycleInvalidCallingContext"},
    {ErrorCode::kLifecycleRunState, "kLifecycleRunState"},
    {ErrorCode::kLifecycleQuiesceFailed, "kLifecycleQuiesceFailed"},
    {ErrorCode::kLifecycleStageFailed, "kLifecycleStageFailed"},
    {ErrorCode::kLifecycleRollbackFailed, "kLifecycleRollbackFailed"},
    {ErrorCode::kPublicationPartial, "kPublicationPartial"},
    {ErrorCode::kRateBindingInvalid, "kRateBindingInvalid"},
    {ErrorCode::kRateBindingAboveMaximum, "kRateBindingAboveMaximum"},
    {ErrorCode::kRateBindingConflict, "kRateBindingConflict"},
    {ErrorCode::kArithmeticOverflow, "kArithmeticOverflow"},
    {ErrorCode::kPreparedStorageInvalid, "kPreparedStorageInvalid"}};
  for (const auto& [code, name] : table) {
    EXPECT_EQ(error_code_name(code), name);
    EXPECT_STREQ(RuntimeError::error_string(code), name);
  }
}

TEST(ErrorCodeName, OutsideTheTableIsUnknown) {
  EXPECT_EQ(error_code_name(static_cast<ErrorCode>(42)), "unknown");
  EXPECT_EQ(error_code_name(static_cast<ErrorCode>(-1)), "unknown");
  EXPECT_EQ(error_code_name(static_cast<ErrorCode>(INT32_MAX)), "unknown");
  EXPECT_STREQ(RuntimeError::error_string(static_cast<ErrorCode>(42)), "unknown");
}

TEST(Error, DefaultIsFailureWithEmptyMessage) {
  const Error error;
  EXPECT_EQ(error.code, ErrorCode::kFailure);
  EXPECT_TRUE(error.message.empty());
  EXPECT_EQ(error.provenance, 0u);
}

TEST(MakeUnexpected, CarriesCodeMessageAndProvenance) {
  const expected<int> result = make_unexpected(ErrorCode::kFailure, "cudaEventRecord failed", 35);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kFailure);
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
  const RuntimeError with_view(ErrorCode::kPermissionDenied, std::string_view("read-only"));
  EXPECT_EQ(with_view.code(), ErrorCode::kPermissionDenied);
  EXPECT_STREQ(with_view.what(), "kPermissionDenied: read-only");
  const RuntimeError plain("just text");
  EXPECT_EQ(plain.code(), ErrorCode::kFailure);
  EXPECT_STREQ(plain.what(), "just text");
}

// Holoscan 5.0 formats "{}: {}" for every text it is given; only a null C string, the code alone
// and an Error without message read as the bare name.
TEST(RuntimeError, AnEmptyTextKeepsItsSeparatorAsHoloscan50s) {
  EXPECT_STREQ(RuntimeError(ErrorCode::kFailure, std::string()).what(), "kFailure: ");
  EXPECT_STREQ(RuntimeError(ErrorCode::kFailure, std::string_view()).what(), "kFailure: ");
  EXPECT_STREQ(RuntimeError(ErrorCode::kFailure, "").what(), "kFailure: ");
  EXPECT_STREQ(RuntimeError(ErrorCode::kFailure, static_cast<const char*>(nullptr)).what(),
               "kFailure");
  EXPECT_EQ(RuntimeError::construct_error_message(ErrorCode::kClosed, std::string_view()),
            "kClosed: ");
  EXPECT_EQ(RuntimeError::construct_error_message(ErrorCode::kClosed, nullptr), "kClosed");
}

TEST(RuntimeError, FromAnErrorRendersAnEmptyMessageAsTheCodeName) {
  const RuntimeError empty(Error{ErrorCode::kNotReady, "", 0});
  EXPECT_EQ(empty.code(), ErrorCode::kNotReady);
  EXPECT_STREQ(empty.what(), "kNotReady");
  const RuntimeError full(Error{ErrorCode::kFailure, "cudaEventRecord failed", 35});
  EXPECT_STREQ(full.what(), "kFailure: cudaEventRecord failed");
  EXPECT_EQ(to_string(Error{ErrorCode::kClosed, "", 0}), "kClosed");
  try {
    throw RuntimeError(Error{ErrorCode::kIncompatible, "v2", 0});
  } catch (const std::runtime_error& caught) {
    EXPECT_STREQ(caught.what(), "kIncompatible: v2");
  }
}

}  // namespace
}  // namespace holoscan
