#!/usr/bin/env bash
# Builds and runs the demo from a fresh machine: a producer hands tensors from its pool over DLPack
# to consumers on other streams, every value checked (host path when there is no GPU).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh >/dev/null
cmake --preset default >/dev/null
cmake --build --preset default --target holoscan_dlpack_demo -j "${HOLOSCAN_DLPACK_JOBS:-$(nproc)}" >/dev/null
exec build/default/examples/holoscan_dlpack_demo "$@"
