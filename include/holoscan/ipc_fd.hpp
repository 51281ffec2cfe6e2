#pragma once
/** @file @brief Former path of <holoscan/ipc/fd.hpp>, kept until the next minor release. */
#include "holoscan/ipc/fd.hpp"
