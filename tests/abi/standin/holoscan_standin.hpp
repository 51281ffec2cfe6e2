#pragma once
// A stand-in for Holoscan SDK 5.0's libholoscan_core: a few of its entities declared in plain
// `namespace holoscan`, so that their symbols are mangled exactly as 5.0 mangles them
// (`nm -D libholoscan_core.so.5`), with behaviour that tells them apart from this library's.
// Only the stand-in's own sources include this header: no translation unit may see both.
#include <dlpack/dlpack.h>

#include <string_view>

namespace holoscan {

enum class ErrorCode { kSuccess = 0, kNotSupported = 23 };

/** @brief What every stand-in Tensor reports as its data: never a real address. */
inline void* const kStandInData = reinterpret_cast<void*>(0x5050);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(DLManagedTensor* managed);  // _ZN8holoscan6TensorC1EP15DLManagedTensor
  virtual ~Tensor() = default;
  void* data() const;  // _ZNK8holoscan6Tensor4dataEv

 private:
  DLManagedTensor* managed_ = nullptr;
};

Tensor make_tensor_from_dlpack(DLManagedTensor* managed);  // _ZN8holoscan23make_tensor_...
std::string_view error_code_name(ErrorCode code);          // _ZN8holoscan15error_code_name...

}  // namespace holoscan
