#pragma once
/**
 * @file
 * @brief Holoscan's include path for expected and its helpers: forwards to <holoscan/expected.hpp>.
 */
#include "holoscan/expected.hpp"
