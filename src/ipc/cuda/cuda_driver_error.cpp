#include "ipc/cuda/cuda_driver_error.hpp"

#include <string>

#include "ipc/cuda/cuda_ipc_api.hpp"

namespace holoscan::detail {

Error driver_error(CUresult status, const char* call) noexcept {
  Error error{ErrorCode::kFailure, {}, static_cast<std::uint64_t>(status)};
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuda_ipc().get_error_name(status, &name) != CUDA_SUCCESS || name == nullptr) {
    name = nullptr;
  }
  if (cuda_ipc().get_error_string(status, &text) != CUDA_SUCCESS || text == nullptr) {
    text = nullptr;
  }
  try {
    error.message.append(call).append(" failed: ");
    if (name != nullptr) {
      error.message.append(name);
    } else {
      error.message.append("CUresult ").append(std::to_string(static_cast<int>(status)));
    }
    if (text != nullptr) {
      error.message.append(" (").append(text).append(")");
    }
  } catch (...) {
    error.message.clear();
  }
  return error;
}

}  // namespace holoscan::detail
