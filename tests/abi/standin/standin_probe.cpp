// The stand-in's own callers, in another translation unit than the definitions so that every call
// goes through the dynamic linker (the PLT): with a second definition of the same name in the
// process, these are the calls that would be bound to it.
#include "standin/holoscan_standin.hpp"

/** @brief Bit 0: make_tensor_from_dlpack, bit 1: Tensor(DLManagedTensor*), bit 2:
 *         error_code_name reached the stand-in's definitions; 7 when all did. */
extern "C" int holoscan_standin_probe(DLManagedTensor* managed) {
  int reached = 0;
  if (holoscan::make_tensor_from_dlpack(managed).data() == holoscan::kStandInData) {
    reached |= 1;
  }
  if (holoscan::Tensor(managed).data() == holoscan::kStandInData) {
    reached |= 2;
  }
  if (holoscan::error_code_name(holoscan::ErrorCode::kNotSupported) == "standin") {
    reached |= 4;
  }
  return reached;
}
