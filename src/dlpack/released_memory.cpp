#include "dlpack/released_memory.hpp"

#include <cstdio>
#include <memory>
#include <new>
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

bool ReleasedMemory::adopt(void* data, TensorMemoryRelease& release) noexcept {
  // A refused allocation initializes nothing: `release` is moved only once the room is there
  // (std::function's move never throws).
  pending_ = new (std::nothrow) Pending{data, std::move(release)};
  return pending_ != nullptr;
}

ReleasedMemory::~ReleasedMemory() {
  release_when_safe(pending_ != nullptr ? &Pending::run : nullptr, pending_);
}

}  // namespace holoscan::detail
