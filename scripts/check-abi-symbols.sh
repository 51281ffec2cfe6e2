#!/usr/bin/env bash
# Checks the dynamic symbols of a shared build of this library against Holoscan SDK 5.0's:
#   tagged LIB            every defined symbol that names a holoscan entity carries the ABI tag
#                         (mangled B15holoscan_dlpack, demangled [abi:holoscan_dlpack]);
#   holoscan-5.0 LIB [CORE]
#                         no defined symbol naming a holoscan entity equals one that
#                         libholoscan_core.so.5 defines. CORE is that library; without it the
#                         HOLOSCAN_CORE_LIBRARY environment variable, then the `holoscan` Python
#                         package (the holoscan-core wheel) are tried; if none is found the check
#                         is skipped (exit 77) with the reason.
# Symbols that name no holoscan entity (standard-library template instantiations, vague linkage)
# are the same definitions in both libraries by the ODR and are left out; their count is printed.
set -euo pipefail

mode=${1:?usage: check-abi-symbols.sh tagged|holoscan-5.0 LIB [CORE]}
lib=${2:?the shared library to check}
core=${3:-${HOLOSCAN_CORE_LIBRARY:-}}

defined() { nm -D --defined-only "$1" | awk 'NF == 3 {print $3}' | sort -u; }
names_holoscan() { grep -E '8holoscan' || true; }

case "$mode" in
  tagged)
    untagged=$(defined "$lib" | names_holoscan | grep -v 'B15holoscan_dlpack' || true)
    total=$(defined "$lib" | names_holoscan | wc -l)
    if [ -n "$untagged" ]; then
      echo "symbols naming holoscan entities without the ABI tag:"
      echo "$untagged" | c++filt
      exit 1
    fi
    echo "all $total defined symbols naming holoscan entities carry [abi:holoscan_dlpack]"
    ;;
  holoscan-5.0)
    if [ -z "$core" ]; then
      core=$(python3 - <<'PY' 2>/dev/null || true
import importlib.util, os
spec = importlib.util.find_spec("holoscan")
for location in (spec.submodule_search_locations or []) if spec else []:
    candidate = os.path.join(location, "lib", "libholoscan_core.so.5")
    if os.path.exists(candidate):
        print(candidate)
        break
PY
)
    fi
    if [ -z "$core" ] || [ ! -r "$core" ]; then
      echo "SKIPPED: libholoscan_core.so.5 of Holoscan 5.0 not found (pass it as HOLOSCAN_CORE_LIBRARY"
      echo "or install the holoscan-core wheel); nothing to compare against"
      exit 77
    fi
    common=$(comm -12 <(defined "$lib") <(defined "$core"))
    ours=$(echo "$common" | names_holoscan)
    shared_std=$(echo "$common" | grep -cv '8holoscan' || true)
    if [ -n "$ours" ]; then
      echo "symbols defined by both this library and $core:"
      echo "$ours" | c++filt
      exit 1
    fi
    echo "no holoscan symbol of $lib is defined by $core"
    echo "($shared_std standard-library instantiations are defined by both, identical by the ODR)"
    ;;
  *)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac
