#!/usr/bin/env bash
# Checks that README.md shows the examples as they are: every part of examples/readme/* between a
# `readme-begin` and a `readme-end` marker line must appear in README.md verbatim, lines in order.
# Usage: check-readme-examples.sh SOURCE_DIR
set -euo pipefail
cd "${1:?usage: check-readme-examples.sh SOURCE_DIR}"

status=0
for example in examples/readme/*; do
  # Each marked part, its lines joined by newlines, one part per NUL-terminated record.
  while IFS= read -r -d '' part; do
    if ! awk -v part="$part" 'BEGIN { RS = "^$" } { exit index($0, part) ? 0 : 1 }' README.md; then
      echo "README.md does not show this part of $example as it is:"
      printf '%s\n' "$part"
      status=1
    fi
  done < <(awk '/readme-end/ { printf "%s%c", part, 0; inside = 0 }
                inside { part = part $0 "\n" }
                /readme-begin/ { inside = 1; part = "" }' "$example")
done
[ "$status" = 0 ] && echo "README.md shows every marked part of examples/readme/ as it is"
exit "$status"
