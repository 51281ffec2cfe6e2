#!/usr/bin/env bash
# Compiles every public header on its own (-fsyntax-only, warnings as errors), so that each
# includes what it uses, and checks that none pulls in a CUDA or UCX header.
# Usage: compile_each.sh INCLUDE_DIR COMPILER FLAGS...
set -euo pipefail
include_dir=$1 compiler=$2
shift 2
failed=0 count=0
while read -r header; do
  count=$((count + 1))
  if ! printf '#include <%s>\n#if defined(__CUDA_RUNTIME_API_H__) || defined(UCP_API_H_)\n#error "%s pulls in a CUDA or UCX header"\n#endif\n' \
      "$header" "$header" | "$compiler" "$@" -fsyntax-only -Wall -Wextra -Werror -x c++ -; then
    echo "FAILED: <$header> does not compile alone"
    failed=1
  fi
done < <(cd "$include_dir" && find holoscan -name '*.hpp' | sort)
[ "$failed" = 0 ] && echo "all $count public headers compile alone"
exit "$failed"
