#pragma once
/**
 * @file
 * @brief Tensors across hosts over UCX: everything in one include (target holoscan::dlpack_ucx).
 *
 * A ucx::Worker listens or connects, sends Tensors to its peers and receives theirs into
 * receiver-owned memory, with the library's ordering and lifetime promises across the wire. See
 * docs/ucx.md for the protocol and the guarantees.
 */
#include "holoscan/ucx/wire.hpp"
#include "holoscan/ucx/worker.hpp"
