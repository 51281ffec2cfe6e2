#!/usr/bin/env bash
# Installs what holoscan-dlpack builds against, idempotently, on Debian bookworm or later.
#
# System packages come from the running Debian. DLPack >= 1.0 is not in bookworm, so the
# libdlpack-dev packages of trixie (1.0) and sid (1.3) are fetched with a private apt state and
# unpacked into .deps/ (never into /), without touching the system's sources list. tl-expected is
# unpacked there too, so that .deps/ alone can travel to a machine without a package registry.
# UCX with its CUDA transports (Debian's UCX has none) comes from the libucx-cu13 wheel, unpacked
# into .deps/ucx/ (see unpack_ucx below); HOLOSCAN_DLPACK_UCX=0 leaves it out.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=${HOLOSCAN_DLPACK_DEPS:-$root/.deps}
mkdir -p "$deps"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
packages=(cmake ninja-build g++ make libexpected-dev libgtest-dev libbenchmark-dev clang-14
          libclang-rt-14-dev)
# UCX comes as a wheel, fetched with pip (python3 -m zipfile unpacks it, binutils trims it).
[ "${HOLOSCAN_DLPACK_UCX:-1}" = 1 ] && packages+=(python3-pip binutils)
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}"
fi

# name=version:suite of each DLPack header package kept under .deps/
wanted=("dlpack-1.0=1.0-1:trixie" "dlpack-1.3=1.3-1:sid")
todo=()
for entry in "${wanted[@]}"; do
  name=${entry%%=*}
  [ -f "$deps/$name/usr/include/dlpack/dlpack.h" ] || todo+=("$entry")
done
[ -f "$deps/expected/usr/include/tl/expected.hpp" ] || todo+=("expected")

if [ ${#todo[@]} -gt 0 ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  sources=/etc/apt/sources.list.d/debian.sources
  uri=$(awk '/^URIs:/{print $2; exit}' "$sources" 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list)
  mkdir -p "$work/lists/partial" "$work/parts" "$work/debs"
  printf 'deb %s trixie main\ndeb %s sid main\ndeb %s bookworm main\n' "$uri" "$uri" "$uri" >"$work/sources.list"
  opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=$work/parts"
        -o "Dir::State::Lists=$work/lists" -o "APT::Sandbox::User=root")
  apt-get "${opts[@]}" update -qq
  for entry in "${todo[@]}"; do
    if [ "$entry" = expected ]; then
      name=expected; pkg=libexpected-dev
    else
      name=${entry%%=*}; spec=${entry#*=}; pkg="libdlpack-dev=${spec%%:*}"
    fi
    (cd "$work/debs" && rm -f ./*.deb && apt-get "${opts[@]}" download -qq "$pkg")
    rm -rf "${deps:?}/$name"
    dpkg -x "$work"/debs/*.deb "$deps/$name"
    echo "install-deps: unpacked $pkg into $deps/$name"
  done
fi

for entry in "${wanted[@]}"; do
  name=${entry%%=*}
  grep -E '#define DLPACK_(MAJOR|MINOR)_VERSION' "$deps/$name/usr/include/dlpack/dlpack.h" |
    awk -v n="$name" '{v[NR]=$3} END {printf "install-deps: %s has DLPack %s.%s\n", n, v[1], v[2]}'
done

# UCX: the libucx-cu13 wheel keeps its own layout under .deps/ucx (libucx/{include,lib,bin} and
# libucx_cu13.libs/, the renamed cudart the CUDA plugins load through their RPATH). The wheel
# stores every .so name as a full copy: duplicates become links to the real file. Static archives,
# libtool files and the io_demo program are left out and debug sections stripped (the symbols
# stay), so that .deps/ stays small enough to travel to the GPU machine; set
# HOLOSCAN_DLPACK_UCX_DEBUG_INFO=1 to keep the debug sections.
ucx_version=1.22.0
ucx_dir=$deps/ucx

source "$root/scripts/trim-shared-objects.sh"

unpack_ucx() {
  local work=$1 wheel tree
  python3 -m pip download -q --no-deps --only-binary=:all: --dest "$work/wheel" "libucx-cu13==$ucx_version"
  wheel=$(ls "$work"/wheel/libucx_cu13-*.whl)
  tree="$work/ucx"
  python3 -m zipfile -e "$wheel" "$tree"
  find "$tree" \( -name '*.a' -o -name '*.la' \) -delete
  rm -f "$tree/libucx/bin/io_demo"
  chmod +x "$tree"/libucx/bin/* "$tree"/libucx_cu13.libs/*
  find "$tree" -name '*.so*' -type f -exec chmod +x {} +
  link_copies "$tree/libucx/lib"
  link_copies "$tree/libucx/lib/ucx"
  if [ "${HOLOSCAN_DLPACK_UCX_DEBUG_INFO:-0}" != 1 ]; then
    strip_debug $(find "$tree/libucx/bin" "$tree/libucx/lib" -type f \( -name '*.so*' -o -perm -u+x \))
  fi
  echo "$ucx_version" >"$tree/VERSION"
  rm -rf "${ucx_dir:?}"
  mv "$tree" "$ucx_dir"
  echo "install-deps: unpacked $(basename "$wheel") into $ucx_dir ($(du -sh "$ucx_dir" | cut -f1))"
}

if [ "${HOLOSCAN_DLPACK_UCX:-1}" = 1 ]; then
  if [ "$(cat "$ucx_dir/VERSION" 2>/dev/null)" != "$ucx_version" ] ||
     [ ! -f "$ucx_dir/libucx/include/ucp/api/ucp.h" ]; then
    ucx_work=$(mktemp -d)
    unpack_ucx "$ucx_work"
    rm -rf "$ucx_work"
  fi
  echo "install-deps: UCX $(cat "$ucx_dir/VERSION") in $ucx_dir/libucx"
fi
