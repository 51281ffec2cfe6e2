#!/usr/bin/env bash
# Installs the built library into a scratch prefix, then builds and runs an outside consumer of
# each library through find_package, again through add_subdirectory of the source tree, and again
# through FetchContent of the source tree as shared libraries (so that every library links with
# only the other's exported symbols); the UCX consumer too when the library was built with UCX.
# Usage: run_package_test.sh SOURCE_DIR BUILD_DIR PREFIX_PATH [COMPILER_LAUNCHER]
set -euo pipefail
source_dir=$1 build_dir=$2 prefix_path=${3//:/;}  # CMake list, passed with ":"
launcher=${4:+-DCMAKE_CXX_COMPILER_LAUNCHER=$4}
scratch="$build_dir/package-test"
rm -rf "$scratch"
cmake --install "$build_dir" --prefix "$scratch/install" >/dev/null

consume() {  # build-dir cmake-arguments...: configure, build and run the consumers
  local dir=$1
  shift
  cmake -S "$source_dir/tests/package" -B "$dir" -G Ninja $launcher "$@" >/dev/null
  cmake --build "$dir" >/dev/null
  "$dir/consumer"
  "$dir/consumer_ipc"
  # One tensor to itself over UCX (TCP on the loopback).
  if [ -x "$dir/consumer_ucx" ]; then UCX_TLS=tcp timeout 60 "$dir/consumer_ucx"; fi
}
consume "$scratch/found" -DCMAKE_PREFIX_PATH="$scratch/install;$prefix_path"
consume "$scratch/subdir" -DHOLOSCAN_DLPACK_SOURCE_DIR="$source_dir" \
  -DCMAKE_PREFIX_PATH="$prefix_path"
consume "$scratch/fetched" -DHOLOSCAN_DLPACK_FETCH_SOURCE_DIR="$source_dir" \
  -DBUILD_SHARED_LIBS=ON -DCMAKE_PREFIX_PATH="$prefix_path"
