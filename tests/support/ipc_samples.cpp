#include "support/ipc_samples.hpp"

#include <gtest/gtest.h>

namespace holoscan::test {

ipc::TensorDescriptor sample_descriptor() {
  ipc::TensorDescriptor d;
  d.export_id = 7;
  d.allocation_id = 3;
  d.handle_kind = ipc::MemoryHandleKind::kFake;
  for (std::size_t i = 0; i < d.handle_bytes.size(); ++i) {
    d.handle_bytes[i] = static_cast<std::uint8_t>(0xa0 + i);
    d.readiness_event[i] = static_cast<std::uint8_t>(0x10 + i);
  }
  d.allocation_bytes = 4096;
  d.offset = 256;
  for (std::size_t i = 0; i < d.device_uuid.size(); ++i) {
    d.device_uuid[i] = static_cast<std::uint8_t>(0xc0 + i);
  }
  d.dtype = DLDataType{kDLFloat, 32, 1};
  d.shape = {4, 8};
  d.strides = {8, 1};
  d.dlpack_flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  d.has_readiness_event = true;
  d.exporter_pid = 1234;
  return d;
}

std::vector<std::uint8_t> encoded(const ipc::TensorDescriptor& descriptor) {
  auto bytes = ipc::encode(descriptor);
  EXPECT_TRUE(bytes.has_value()) << bytes.error().message;
  return bytes ? *bytes : std::vector<std::uint8_t>{};
}

}  // namespace holoscan::test
