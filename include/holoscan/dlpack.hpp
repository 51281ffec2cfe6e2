#pragma once
/**
 * @file
 * @brief Holoscan 5.0's <holoscan/dlpack.hpp>: DLManagedTensorContext, the owners of imported
 *        DLPack tensors, and with them Tensor and the import functions.
 */
#include "holoscan/dl_managed_memory_buffer.hpp"
#include "holoscan/dlpack_context.hpp"
#include "holoscan/tensor.hpp"
