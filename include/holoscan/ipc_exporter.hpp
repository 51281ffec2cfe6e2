#pragma once
/** @file @brief Former path of <holoscan/ipc/exporter.hpp>, kept until the next minor release. */
#include "holoscan/ipc/exporter.hpp"
