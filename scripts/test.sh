#!/usr/bin/env bash
# Runs the whole test suite from a fresh machine: installs the dependencies, builds and tests the
# default configuration (DLPack 1.3; GPU tests skip without a GPU), then the sanitizer
# configurations: DLPack 1.0 with AddressSanitizer + UBSan + LeakSanitizer, and ThreadSanitizer
# over the CPU tests (the release thread against the fake CUDA runtime among them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh
jobs=${HOLOSCAN_DLPACK_JOBS:-$(nproc)}
for preset in ${HOLOSCAN_DLPACK_PRESETS:-default asan tsan}; do
  echo "== preset $preset"
  cmake --preset "$preset" >/dev/null
  if [ "$preset" = tsan ]; then
    # The tsan test preset runs the cpu label only, all of it in this one binary.
    cmake --build --preset "$preset" -j "$jobs" --target holoscan_dlpack_tests
  else
    cmake --build --preset "$preset" -j "$jobs"
  fi
  ctest --preset "$preset" -j "$jobs"
done
