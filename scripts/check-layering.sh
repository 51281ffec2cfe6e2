#!/usr/bin/env bash
# Checks the direction of the includes between the libraries: the core (src/{cuda,stream,dlpack,
# pool}, src/*.cpp and the headers directly under include/holoscan/ but the ipc and ucx ones)
# includes nothing of the cross-process library (ipc/) or the UCX one (ucx/), and the UCX library
# nothing of the cross-process one. Usage: check-layering.sh SOURCE_DIR
set -euo pipefail
cd "${1:?usage: check-layering.sh SOURCE_DIR}"

core=(src/cuda src/stream src/dlpack src/pool src/*.cpp include/holoscan/core)
for header in include/holoscan/*.hpp; do
  case "$header" in
    include/holoscan/ipc.hpp | include/holoscan/ipc_*.hpp | include/holoscan/ucx.hpp) ;;
    *) core+=("$header") ;;
  esac
done

status=0
check() {  # what pattern files...
  local what=$1 pattern=$2
  shift 2
  local found
  found=$(grep -rnE "^#include [\"<]($pattern)" "$@" || true)
  if [ -n "$found" ]; then
    echo "$what:"
    echo "$found"
    status=1
  fi
}
check "the core includes the cross-process or UCX library" \
  'ipc/|holoscan/ipc|ucx/|holoscan/ucx' "${core[@]}"
check "the UCX library includes the cross-process library" \
  'ipc/|holoscan/ipc' src/ucx include/holoscan/ucx include/holoscan/ucx.hpp
[ "$status" = 0 ] && echo "the core includes neither wing; the UCX library does not include ipc"
exit "$status"
