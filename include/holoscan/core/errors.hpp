#pragma once
/**
 * @file
 * @brief Holoscan's include path for ErrorCode, Error and RuntimeError: forwards to
 * <holoscan/errors.hpp>.
 */
#include "holoscan/errors.hpp"
