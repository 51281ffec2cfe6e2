#pragma once
// Valid descriptors for the cross-process tensor tests.
#include <cstdint>
#include <vector>

#include "holoscan/ipc/descriptor.hpp"

namespace holoscan::test {

/** @brief A valid kFake descriptor: float32 4x8 at offset 256 of a 4096-byte allocation. */
ipc::TensorDescriptor sample_descriptor();

/** @brief encode() of a descriptor the test knows to be valid (fails the test otherwise). */
std::vector<std::uint8_t> encoded(const ipc::TensorDescriptor& descriptor);

}  // namespace holoscan::test
