# Shared by install-deps.sh and ucxx-wheels.sh (source it): making unpacked wheels small enough
# to travel. A wheel stores every name of a shared object (libX.so, .so.0, .so.0.0.0) as a full
# copy, and keeps the debug sections.

# link_copies DIR: libX.so and libX.so.N that copy libX.so.N.M.K become links to it.
link_copies() {
  local file shorter
  for file in "$1"/*.so.*; do
    [ -f "$file" ] && [ ! -L "$file" ] || continue
    shorter=$file
    while [[ $shorter == *.so.* ]]; do
      shorter=${shorter%.*}
      if [ -f "$shorter" ] && [ ! -L "$shorter" ] && cmp -s "$shorter" "$file"; then
        ln -sf "$(basename "$file")" "$shorter"
      fi
    done
  done
}

# segments_aligned FILE: every LOAD segment's file offset and address agree modulo its alignment
# (the loader refuses the file otherwise).
segments_aligned() {
  local type offset address rest
  while read -r type offset address rest; do
    [ "$type" = LOAD ] || continue
    (( offset % ${rest##* } == address % ${rest##* } )) || return 1
  done < <(readelf -lW "$1")
}

# strip_debug FILE...: drops the debug sections (the symbols stay), except where that breaks a
# file's segment layout: strip moves sections that patchelf (auditwheel) placed past the end of
# the original segments, which the libucx-cu13 1.21 wheel's libucs.so shows.
strip_debug() {
  local file
  for file in "$@"; do
    if strip --strip-debug -o "$file.stripped" "$file" && segments_aligned "$file.stripped"; then
      mv "$file.stripped" "$file"
    else
      rm -f "$file.stripped"
    fi
  done
}
