#!/usr/bin/env bash
# Installs what holoscan-dlpack builds against, idempotently, on Debian bookworm or later.
#
# System packages come from the running Debian. DLPack >= 1.0 is not in bookworm, so the
# libdlpack-dev packages of trixie (1.0) and sid (1.3) are fetched with a private apt state and
# unpacked into .deps/ (never into /), without touching the system's sources list. tl-expected is
# unpacked there too, so that .deps/ alone can travel to a machine without a package registry.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=${HOLOSCAN_DLPACK_DEPS:-$root/.deps}
mkdir -p "$deps"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for pkg in cmake ninja-build g++ make libexpected-dev libgtest-dev libbenchmark-dev clang-14 \
           libclang-rt-14-dev; do
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
