// The stand-in's definitions: each observably different from this library's.
#include "standin/holoscan_standin.hpp"

namespace holoscan {

Tensor::Tensor(DLManagedTensor* managed) : managed_(managed) {}

void* Tensor::data() const { return managed_ != nullptr ? kStandInData : nullptr; }

Tensor make_tensor_from_dlpack(DLManagedTensor* managed) { return Tensor(managed); }

std::string_view error_code_name(ErrorCode /*code*/) { return "standin"; }

}  // namespace holoscan
