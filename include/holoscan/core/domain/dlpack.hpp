#pragma once
/**
 * @file
 * @brief Holoscan's include path for DLManagedTensorContext and the DLPack owners: forwards to
 * <holoscan/dlpack.hpp>.
 */
#include "holoscan/dlpack.hpp"
