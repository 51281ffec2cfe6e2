#pragma once
/** @file @brief Former path of <holoscan/ipc/descriptor.hpp>, kept until the next minor release. */
#include "holoscan/ipc/descriptor.hpp"
