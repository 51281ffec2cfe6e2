#!/usr/bin/env bash
# Builds and runs the cross-process demo: a producer process hands 10^4 tensors to two consumer
# processes through a shareable pool, every value checked on the GPU, and prints the throughput
# and the host blocks on the hot path (zero). Without a GPU it says so and exits 0. Arguments go to
# the demo (e.g. `roundtrip count=20000`, `pipeline elements=4096`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "ipc demo: no nvcc here, so the demo's kernels cannot be built"
  exit 0
fi
scripts/install-deps.sh >/dev/null
preset=${HOLOSCAN_DLPACK_PRESET:-default}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target holoscan_dlpack_ipc_demo \
  -j "${HOLOSCAN_DLPACK_JOBS:-$(nproc)}" >/dev/null
exec "build/$preset/examples/holoscan_dlpack_ipc_demo" "$@"
