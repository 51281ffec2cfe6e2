#pragma once
/**
 * @file
 * @brief Holoscan's include path for make_tensor, wrap_memory and TensorByteStridesView: forwards
 * to <holoscan/make_tensor.hpp>.
 */
#include "holoscan/make_tensor.hpp"
