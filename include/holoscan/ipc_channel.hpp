#pragma once
/** @file @brief Former path of <holoscan/ipc/channel.hpp>, kept until the next minor release. */
#include "holoscan/ipc/channel.hpp"
