#pragma once
/**
 * @file
 * @brief Holoscan's include path for MemoryStorageType: forwards to
 * <holoscan/memory_storage_type.hpp>.
 */
#include "holoscan/memory_storage_type.hpp"
