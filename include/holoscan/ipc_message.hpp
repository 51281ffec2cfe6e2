#pragma once
/** @file @brief Former path of <holoscan/ipc/message.hpp>, kept until the next minor release. */
#include "holoscan/ipc/message.hpp"
