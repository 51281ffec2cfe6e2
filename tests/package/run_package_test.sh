#!/usr/bin/env bash
# Installs the built library into a scratch prefix, then builds and runs an outside consumer
# through find_package, and again through add_subdirectory of the source tree; the UCX consumer
# too when the library was built with UCX.
# Usage: run_package_test.sh SOURCE_DIR BUILD_DIR PREFIX_PATH
set -euo pipefail
source_dir=$1 build_dir=$2 prefix_path=${3//:/;}  # CMake list, passed with ":"
scratch="$build_dir/package-test"
rm -rf "$scratch"
cmake --install "$build_dir" --prefix "$scratch/install" >/dev/null

cmake -S "$source_dir/tests/package" -B "$scratch/found" -G Ninja \
  -DCMAKE_PREFIX_PATH="$scratch/install;$prefix_path" >/dev/null
cmake --build "$scratch/found" >/dev/null
"$scratch/found/consumer"
"$scratch/found/consumer_ipc"
run_ucx_consumer() {  # build-dir: one tensor to itself over UCX (TCP on the loopback)
  if [ -x "$1/consumer_ucx" ]; then UCX_TLS=tcp timeout 60 "$1/consumer_ucx"; fi
}
run_ucx_consumer "$scratch/found"

cmake -S "$source_dir/tests/package" -B "$scratch/subdir" -G Ninja \
  -DHOLOSCAN_DLPACK_SOURCE_DIR="$source_dir" -DCMAKE_PREFIX_PATH="$prefix_path" >/dev/null
cmake --build "$scratch/subdir" >/dev/null
"$scratch/subdir/consumer"
"$scratch/subdir/consumer_ipc"
run_ucx_consumer "$scratch/subdir"
