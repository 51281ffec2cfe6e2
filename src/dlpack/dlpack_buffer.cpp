#include "holoscan/dlpack.hpp"

namespace holoscan {

DLManagedMemoryBufferVersioned::DLManagedMemoryBufferVersioned(DLManagedTensorVersioned* self)
    : self_(self) {}

DLManagedMemoryBufferVersioned::~DLManagedMemoryBufferVersioned() {
  release_managed_when_safe(self_);
}

DLManagedMemoryBuffer::DLManagedMemoryBuffer(DLManagedTensor* self) : self_(self) {}

DLManagedMemoryBuffer::~DLManagedMemoryBuffer() { release_managed_when_safe(self_); }

}  // namespace holoscan
