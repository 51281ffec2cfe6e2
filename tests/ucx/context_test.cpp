// What a worker's UCX context is given beyond the environment: the rendezvous pipeline under
// error handling, only where no transport can write into UCX's staging buffers after a peer's
// requests were aborted, and never over a setting the environment made.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "ucx/ucp_objects.hpp"  // internal

namespace holoscan::test {
namespace {

using ucx::detail::context_defaults;
using ucx::detail::UcxSetting;

const std::vector<UcxSetting> kPipeline = {{"RNDV_PIPELINE_ERROR_HANDLING", "y"}};

std::vector<UcxSetting> defaults_with(const std::set<std::string>& environment,
                                      const std::vector<std::string>& components) {
  return context_defaults(
      [&](const std::string& variable) { return environment.count(variable) != 0; }, components);
}

TEST(UcxContext, PipelineUnderErrorHandlingOverConnectionsAndCudaCopies) {
  EXPECT_EQ(defaults_with({}, {"self", "tcp", "sysv", "posix", "cma", "cuda_cpy", "cuda_ipc"}),
            kPipeline);
  EXPECT_EQ(defaults_with({}, {}), kPipeline);
}

TEST(UcxContext, NoPipelineUnderErrorHandlingWithAnRdmaOrUnknownComponent) {
  EXPECT_TRUE(defaults_with({}, {"self", "tcp", "ib", "rdmacm", "cuda_cpy"}).empty());
  EXPECT_TRUE(defaults_with({}, {"tcp", "gga"}).empty());
  EXPECT_TRUE(defaults_with({}, {"tcp", "?"}).empty()) << "an unreadable name is unknown";
}

TEST(UcxContext, TheEnvironmentWins) {
  EXPECT_TRUE(defaults_with({"UCX_RNDV_PIPELINE_ERROR_HANDLING"}, {"tcp"}).empty());
  EXPECT_EQ(defaults_with({"UCX_RNDV_THRESH"}, {"tcp"}), kPipeline);
}

TEST(UcxContext, ThisProcessListsItsComponents) {
  const auto components = ucx::detail::available_components();
  EXPECT_NE(std::find(components.begin(), components.end(), "tcp"), components.end())
      << "the CPU tests run over tcp";
}

}  // namespace
}  // namespace holoscan::test
