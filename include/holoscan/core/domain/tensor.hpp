#pragma once
/**
 * @file
 * @brief Holoscan's include path for Tensor and the DLPack import functions: forwards to
 * <holoscan/tensor.hpp>.
 */
#include "holoscan/tensor.hpp"
