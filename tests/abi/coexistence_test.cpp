// One program linked with this library and with a stand-in for Holoscan SDK 5.0's
// libholoscan_core, which defines holoscan::Tensor, make_tensor_from_dlpack and error_code_name
// under 5.0's mangled names (the stand-in comes first on the link line). Each call must reach the
// library its caller was compiled against: this program's calls reach this library, the
// stand-in's own calls reach the stand-in. Without distinct mangled names one side would be bound
// to the other's definitions without a word.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "forward_declarations.hpp"
#include "holoscan/errors.hpp"

extern "C" int holoscan_standin_probe(DLManagedTensor* managed);

namespace {

// A legacy DLPack tensor over host memory whose deleter counts.
struct Producer {
  float values[4] = {1, 2, 3, 4};
  std::int64_t shape[1] = {4};
  int deleted = 0;
  DLManagedTensor managed{};

  Producer() {
    managed.dl_tensor.data = values;
    managed.dl_tensor.device = {kDLCPU, 0};
    managed.dl_tensor.ndim = 1;
    managed.dl_tensor.dtype = {kDLFloat, 32, 1};
    managed.dl_tensor.shape = shape;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deleted;
    };
  }
};

// The file that defines `symbol` in this process, or "" when none does.
std::string defining_file(const char* symbol) {
  void* address = dlsym(RTLD_DEFAULT, symbol);
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  return info.dli_fname;
}

TEST(Coexistence, ThisProgramsCallsReachThisLibrary) {
  Producer producer;
  {
    auto tensor = holoscan::make_tensor_from_dlpack(&producer.managed);
    ASSERT_TRUE(tensor.has_value()) << tensor.error().message;
    EXPECT_EQ(tensor->data(), producer.values);
    EXPECT_EQ(extent_of(*tensor, 0), 4);
    const holoscan::Tensor constructed(&producer.managed);  // takes it again: deleted twice below
    EXPECT_EQ(constructed.data(), producer.values);
  }
  EXPECT_EQ(producer.deleted, 2);
  EXPECT_EQ(holoscan::error_code_name(holoscan::ErrorCode::kNotSupported), "kNotSupported");
}

TEST(Coexistence, TheStandInsCallsReachTheStandIn) {
  Producer producer;
  EXPECT_EQ(holoscan_standin_probe(&producer.managed), 7);
  EXPECT_EQ(producer.deleted, 0);  // the stand-in never takes ownership
}

TEST(Coexistence, Holoscan50NamesAreDefinedOnlyByTheStandIn) {
  for (const char* symbol :
       {"_ZNK8holoscan6Tensor4dataEv", "_ZN8holoscan6TensorC1EP15DLManagedTensor",
        "_ZN8holoscan23make_tensor_from_dlpackEP15DLManagedTensor",
        "_ZN8holoscan15error_code_nameENS_9ErrorCodeE"}) {
    EXPECT_NE(defining_file(symbol).find("holoscan50_standin"), std::string::npos)
        << symbol << " is defined by " << defining_file(symbol);
  }
}

}  // namespace
