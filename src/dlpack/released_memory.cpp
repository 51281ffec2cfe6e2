#include "dlpack/released_memory.hpp"

#include <cstdio>
#include <memory>
#include <string_view>
#include <utility>

#include "dlpack/producer_deleter.hpp"
#include "holoscan/errors.hpp"

namespace holoscan::detail {
namespace {

constexpr const char* kFailed = "a memory release function failed";
constexpr const char* kThrew = "a memory release function threw";

// Reports the error a release function returned, code and message, without the heap.
void report_returned(const Error& error) noexcept {
  const std::string_view code = error_code_name(error.code);
  char why[512];
  std::snprintf(why, sizeof(why), "%.*s: %s", static_cast<int>(code.size()), code.data(),
                error.message.c_str());
  report_failed_release(kFailed, why);
}

}  // namespace

struct ReleasedMemory::Pending {
  void* data;
  TensorMemoryRelease release;

  static void run(void* context) noexcept {
    std::unique_ptr<Pending> self(static_cast<Pending*>(context));
    if (!self->release) {
      return;
    }
    try {
      if (auto released = self->release(self->data); !released) {
        report_returned(released.error());
      }
    } catch (...) {
      report_release_exception(kThrew);
    }
  }
};

ReleasedMemory::ReleasedMemory(void* data, TensorMemoryRelease release)
    : pending_(new Pending{data, std::move(release)}) {}

ReleasedMemory::~ReleasedMemory() { release_when_safe(&Pending::run, pending_); }

}  // namespace holoscan::detail
