#!/usr/bin/env bash
# Fetches ucxx (tagged send/recv of CuPy arrays, the comparison of scripts/ucx-bench.sh) for the
# GPU machine, which reaches no package registry: the exact wheel set for CPython 3.12 on
# manylinux_2_28 x86_64 goes into .whl/wheels/ (68 MB, stays here), and a trimmed install of it
# into .whl/ucxx-site.tar.xz (about 10 MB, carried), unpacked there into a PYTHONPATH folder.
# NumPy and CuPy are the GPU machine's own. Idempotent.
#
# Trimmed away (nothing ucxx imports or loads at run time): headers, CMake and pkg-config files,
# static and libtool archives, UCX's programs and perftest plugin, cuda.core's CUDA 12 build, and
# the debug sections of the shared objects; copies of a shared object become links.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=$root/.whl
tarball=$dir/ucxx-site.tar.xz
# ucxx 0.52 needs UCX < 1.22, so it brings its own libucx-cu13 (1.21) beside the project's 1.22.
wheels=(ucxx-cu13==0.52.0 libucxx-cu13==0.52.0 rmm-cu13==26.10.0 librmm-cu13==26.10.0
        rapids-logger==0.3.0 cuda-core==1.2.2 cuda-bindings==13.5.0 cuda-pathfinder==1.9.1
        nvidia-ml-py==13.615.71 libucx-cu13==1.21.0)
stamp="${wheels[*]}"
if [ -f "$tarball" ] && [ "$(cat "$dir/ucxx-site.version" 2>/dev/null)" = "$stamp" ]; then
  echo "ucxx-wheels: $tarball is up to date ($(du -h "$tarball" | cut -f1))"
  exit 0
fi
mkdir -p "$dir/wheels"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 --implementation cp --dest "$dir/wheels" "${wheels[@]}"
echo "ucxx-wheels: $(ls "$dir"/wheels/*.whl | wc -l) wheels, $(du -ch "$dir"/wheels/*.whl | tail -1 | cut -f1) in $dir/wheels"

site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
python3 -m pip install -q --no-deps --target "$site" --python-version 3.12 \
  --platform manylinux_2_28_x86_64 --implementation cp --only-binary=:all: "$dir"/wheels/*.whl
rm -rf "$site"/{librmm,libucxx,libucx}/include "$site"/libucx/{bin,share} \
  "$site"/librmm/lib64/cmake "$site"/libucxx/lib64/cmake "$site"/libucx/lib/{cmake,pkgconfig} \
  "$site"/cuda/core/cu12 "$site"/libucx/lib/ucx/libucx_perftest_cuda.so*
find "$site" \( -name '*.a' -o -name '*.la' \) -delete
find "$site" -name __pycache__ -prune -exec rm -rf {} +
source "$root/scripts/trim-shared-objects.sh"
link_copies "$site/libucx/lib"
link_copies "$site/libucx/lib/ucx"
strip_debug $(find "$site" -type f -name '*.so*')
echo "ucxx-wheels: trimmed install $(du -sh "$site" | cut -f1); compressing"
tar -C "$site" -cf - . | xz -T2 -6 >"$tarball.partial"
mv "$tarball.partial" "$tarball"
echo "$stamp" >"$dir/ucxx-site.version"
echo "ucxx-wheels: $tarball ($(du -h "$tarball" | cut -f1)); carry it to the GPU machine"
