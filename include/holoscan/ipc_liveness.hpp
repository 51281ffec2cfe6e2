#pragma once
/** @file @brief Former path of <holoscan/ipc/liveness.hpp>, kept until the next minor release. */
#include "holoscan/ipc/liveness.hpp"
