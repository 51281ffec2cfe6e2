#pragma once
/** @file @brief Former path of <holoscan/ipc/importer.hpp>, kept until the next minor release. */
#include "holoscan/ipc/importer.hpp"
