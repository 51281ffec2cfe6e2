#pragma once
/**
 * @file
 * @brief Cross-process tensors: everything in one include.
 *
 * A producer process exports Tensors with an ipc::Exporter (or ipc::export_tensor); a consumer
 * process imports them with an ipc::Importer (or ipc::import_tensor) over an ipc::Channel. The
 * memory crosses once per allocation, readiness and reuse are ordered on the GPU through
 * interprocess events, and a consumer that dies gives its claims back once its process has exited.
 * See docs/ipc.md for the protocol and the guarantees.
 */
#include "holoscan/ipc/channel.hpp"
#include "holoscan/ipc/claims.hpp"
#include "holoscan/ipc/descriptor.hpp"
#include "holoscan/ipc/exporter.hpp"
#include "holoscan/ipc/fd.hpp"
#include "holoscan/ipc/importer.hpp"
#include "holoscan/ipc/liveness.hpp"
#include "holoscan/ipc/message.hpp"
#include "holoscan/ipc/pool_memory.hpp"
