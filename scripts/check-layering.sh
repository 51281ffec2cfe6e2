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

# The Python extension builds without the CUDA toolkit's headers (the wheel finds the runtime
# through torch or CuPy): none of its sources may reach a CUDA header through the library's.
cuda_free=$(python3 - <<'PY'
import pathlib, re
quoted = re.compile(r'^#include "([^"]+)"', re.M)
angled = re.compile(r'^#include <(cuda[^>]*\.h)>', re.M)
roots = [pathlib.Path("src"), pathlib.Path("include"), pathlib.Path("python/src")]
def find(name, beside):
    for base in [beside] + roots:
        candidate = base / name
        if candidate.is_file():
            return candidate
    return None
reaches = {}
def cuda_via(path, seen):
    if path in reaches:
        return reaches[path]
    if path in seen:
        return None
    seen.add(path)
    text = path.read_text()
    found = angled.search(text)
    result = [str(path), found.group(1)] if found else None
    for name in quoted.findall(text):
        if result:
            break
        target = find(name, path.parent)
        if target is not None:
            chain = cuda_via(target, seen)
            if chain:
                result = [str(path)] + chain
    reaches[path] = result
    return result
for source in sorted(pathlib.Path("python/src").glob("*.cpp")):
    chain = cuda_via(source, set())
    if chain:
        print(" -> ".join(chain))
PY
)
if [ -n "$cuda_free" ]; then
  echo "a Python extension source reaches a CUDA header:"
  echo "$cuda_free"
  status=1
fi
[ "$status" = 0 ] && echo "the core includes neither wing; the UCX library does not include ipc;" \
  "no Python extension source reaches a CUDA header"
exit "$status"
