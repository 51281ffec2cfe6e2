#pragma once
// HOLOSCAN_DLPACK_WING_API: the core's internal functions and classes that its wings (the
// cross-process and the UCX libraries) call. A shared core exports them, tagged like the public
// API; their headers stay in src/ and are never installed, so they are no public API.
#include "holoscan/export.hpp"

#define HOLOSCAN_DLPACK_WING_API HOLOSCAN_DLPACK_API
