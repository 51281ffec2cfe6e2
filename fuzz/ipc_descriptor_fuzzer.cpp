// libFuzzer target for the descriptor decoder: bytes from another process must never crash
// decode(), every refusal must be kInvalidArgument with a message, and whatever decodes must
// re-encode to the very same bytes (the format is canonical) and decode to the same descriptor.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "holoscan/ipc/descriptor.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using holoscan::ErrorCode;
  auto decoded = holoscan::ipc::decode(data, size);
  if (!decoded) {
    if (decoded.error().code != ErrorCode::kInvalidArgument || decoded.error().message.empty()) {
      __builtin_trap();
    }
    return 0;
  }
  auto encoded = holoscan::ipc::encode(*decoded);
  if (!encoded || encoded->size() != size || !std::equal(encoded->begin(), encoded->end(), data)) {
    __builtin_trap();
  }
  auto again = holoscan::ipc::decode(encoded->data(), encoded->size());
  if (!again || *again != *decoded) {
    __builtin_trap();
  }
  return 0;
}
