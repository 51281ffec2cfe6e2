#pragma once
/** @file @brief Former path of <holoscan/ipc/claims.hpp>, kept until the next minor release. */
#include "holoscan/ipc/claims.hpp"
