#!/usr/bin/env bash
# Runs the whole test suite from a fresh machine: installs the dependencies, builds and tests the
# default configuration (DLPack 1.3; GPU tests skip without a GPU), then the sanitizer
# configurations: DLPack 1.0 with AddressSanitizer + UBSan + LeakSanitizer, ThreadSanitizer over
# the CPU tests (the release thread against the fake CUDA runtime among them), and the libFuzzer
# targets (ASan + UBSan, clang), each fuzzed for a bounded time after its corpus replays; then the
# Python package: `pip install .` with the test helper extension into a virtualenv under build/
# and its pytest suite (GPU tests skip there too).
#
# HOLOSCAN_DLPACK_PRESETS picks the configurations (unset: default asan tsan fuzz; empty: none);
# HOLOSCAN_DLPACK_FUZZ_SECONDS the time per fuzzer (default: 25 s for DLPack import, 12 s for the
# IPC descriptor, the IPC frames and the UCX messages, 10 s for the IPC channel, the IPC admission
# record and the host copies, 10 s for the layout rules and the public API: a smoke run beside
# the corpus replay, within CI's time; fuzz longer by hand);
# HOLOSCAN_DLPACK_PYTHON=0 skips the Python part.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh
jobs=${HOLOSCAN_DLPACK_JOBS:-$(nproc)}

fuzz_for() {  # fuzzer-name seconds: new inputs go to a scratch folder, never into the corpus
  local name=$1 seconds=$2 scratch
  scratch=$(mktemp -d)
  echo "== fuzzing $name for ${seconds}s"
  "build/fuzz/fuzz/holoscan_dlpack_${name}_fuzzer" -max_total_time="$seconds" \
    -print_final_stats=1 -artifact_prefix="build/fuzz/${name}-" "$scratch" \
    "fuzz/corpus/$name" 2>&1 | grep -E "^stat::number_of_executed_units|^SUMMARY|invariant|ERROR" || true
  rm -rf "$scratch"
  if compgen -G "build/fuzz/${name}-*" >/dev/null; then
    echo "fuzz: $name found a failing input: $(ls build/fuzz/${name}-*)"
    return 1
  fi
}

for preset in ${HOLOSCAN_DLPACK_PRESETS-default asan tsan fuzz}; do
  echo "== preset $preset ($(date -u +%T))"
  cmake --preset "$preset" >/dev/null
  case "$preset" in
    tsan)
      # The tsan test preset runs the cpu label only: build just the binaries that hold it (the
      # UCX ones when UCX was found).
      targets=(holoscan_dlpack_tests holoscan_dlpack_compat_tests holoscan_dlpack_compat20_tests
               holoscan_dlpack_coexistence_tests)
      # grep reads all of ninja's output (-q would stop at the match and, under pipefail, the
      # SIGPIPE that ninja gets would make the test fail).
      if ninja -C build/tsan -t targets all | grep '^holoscan_dlpack_ucx_tests:' >/dev/null; then
        targets+=(holoscan_dlpack_ucx_tests holoscan_dlpack_ucx_peer)
      fi
      cmake --build --preset "$preset" -j "$jobs" --target "${targets[@]}"
      ;;
    *)
      cmake --build --preset "$preset" -j "$jobs"
      ;;
  esac
  ctest --preset "$preset" -j "$jobs"
  if [ "$preset" = fuzz ]; then
    rm -f build/fuzz/dlpack_import-* build/fuzz/ipc_descriptor-* build/fuzz/ipc_frame-* \
      build/fuzz/ipc_channel-* \
      build/fuzz/ucx_wire-* build/fuzz/ipc_admissions-* build/fuzz/tensor_copy-* \
      build/fuzz/layout_rules-* build/fuzz/public_api-*
    fuzz_for dlpack_import "${HOLOSCAN_DLPACK_FUZZ_SECONDS:-25}"
    fuzz_for ipc_descriptor "${HOLOSCAN_DLPACK_FUZZ_SECONDS:-12}"
    fuzz_for ipc_frame "${HOLOSCAN_DLPACK_FUZZ_SECONDS:-12}"
    fuzz_for ipc_channel "${HOLOSCAN_DLPACK_FUZZ_SECONDS:-10}"
    fuzz_for ucx_wire "${HOLOSCAN_DLPACK_FUZZ_SECONDS:-12}"
    fuzz_for ipc_admissions "${HOLOSCAN_DLPACK_FUZZ_SECONDS:-10}"
    fuzz_for tensor_copy "${HOLOSCAN_DLPACK_FUZZ_SECONDS:-10}"
    fuzz_for layout_rules "${HOLOSCAN_DLPACK_FUZZ_SECONDS:-10}"
    fuzz_for public_api "${HOLOSCAN_DLPACK_FUZZ_SECONDS:-10}"
  fi
done

if [ "${HOLOSCAN_DLPACK_PYTHON:-1}" = 1 ]; then
  echo "== python ($(date -u +%T))"
  venv=build/python-venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  # nanobind beside the package: test_stubs regenerates the stub and compares it with the
  # installed one. HOLOSCAN_DLPACK_PYTHON_TESTING adds the suite's helper extension.
  "$venv/bin/python" -m pip install -q numpy pytest nanobind
  # HOLOSCAN_DLPACK_WITH_UCX=AUTO: holoscan_dlpack.ucx whenever .deps/ucx is there, also in a build
  # folder configured before the package had it.
  "$venv/bin/python" -m pip install -q -Ccmake.define.HOLOSCAN_DLPACK_PYTHON_TESTING=ON \
    -Ccmake.define.HOLOSCAN_DLPACK_WITH_UCX=AUTO .
  "$venv/bin/python" -m pytest -rs -p no:cacheprovider tests/python
fi
