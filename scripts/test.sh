#!/usr/bin/env bash
# Runs the whole test suite from a fresh machine: installs the dependencies, builds and tests the
# default configuration (DLPack 1.3; GPU tests skip without a GPU), then the sanitizer
# configuration (DLPack 1.0, AddressSanitizer + UBSan + LeakSanitizer), then the Python package:
# `pip install .` into a virtualenv under build/ and its pytest suite (GPU tests skip there too).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh
jobs=${HOLOSCAN_DLPACK_JOBS:-$(nproc)}
for preset in ${HOLOSCAN_DLPACK_PRESETS:-default asan}; do
  echo "== preset $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  ctest --preset "$preset" -j "$jobs"
done

if [ "${HOLOSCAN_DLPACK_PYTHON:-1}" = 1 ]; then
  echo "== python"
  venv=build/python-venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q numpy pytest
  "$venv/bin/python" -m pip install -q .
  "$venv/bin/python" -m pytest -rs -p no:cacheprovider tests/python
fi
