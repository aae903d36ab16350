#!/usr/bin/env bash
# The engine's promise (pipeline/core): no clock, no threads, no clap, no serde. Its code outside
# tests must not name Instant, SystemTime or std::thread (time and waiting come from the caller),
# and `cargo tree` of the engine must show neither clap nor serde. Exits 1 with what it found.
set -euo pipefail
cd "$(dirname "$0")/.."
src=pipeline/core/src
status=0

# Test code may time and spawn: skip tests.rs files and whatever follows a file's #[cfg(test)].
found=$(find "$src" -name '*.rs' ! -name tests.rs -print0 |
  xargs -0 awk '/^[[:space:]]*#\[cfg\(test\)\]/ { nextfile }
    /^[[:space:]]*\/\// { next }
    /Instant|SystemTime|std::thread/ { print FILENAME ":" FNR ": " $0 }')
if [ -n "$found" ]; then
  echo "check-engine: the engine reads a clock or uses threads outside tests:" >&2
  echo "$found" >&2
  status=1
fi

deps=$(cargo tree -p pipeline -e normal --prefix none --format '{p}' | awk '{print $1}' | sort -u)
for banned in clap serde serde_json; do
  if grep -qx "$banned" <<<"$deps"; then
    echo "check-engine: the engine depends on $banned (cargo tree -p pipeline -i $banned)" >&2
    status=1
  fi
done

[ $status -eq 0 ] && echo "check-engine: no clock, no threads, no clap, no serde in pipeline/core"
exit $status
