#!/usr/bin/env bash
# Puts the P4Runtime protos (P4Runtime v1.5.0, as shipped in the finsy 0.30.0 wheel, byte-identical
# to p4lang/p4runtime) into p4runtime-server/proto/, which git ignores: no proto is kept in the
# tree. The wheel's sha256 is pinned. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=p4runtime-server/proto
want=(p4/v1/p4runtime.proto p4/v1/p4data.proto p4/config/v1/p4info.proto p4/config/v1/p4types.proto google/rpc/status.proto google/rpc/code.proto)
missing=0
for f in "${want[@]}"; do [ -f "$dest/$f" ] || missing=1; done
[ "$missing" = 0 ] && exit 0
sha=29f5194b40ac1c19caacbc4a138b3208b1efa1a6d930c51bccd834d273d22097
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: finsy==0.30.0 -d "$tmp"
whl=$(ls "$tmp"/finsy-0.30.0-*.whl)
echo "$sha  $whl" | sha256sum -c --quiet -
python3 - "$whl" "$dest" "${want[@]}" <<'PY'
import os, sys, zipfile
whl, dest, files = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(whl) as z:
    for f in files:
        data = z.read("finsy/proto/" + f)
        os.makedirs(os.path.dirname(os.path.join(dest, f)), exist_ok=True)
        with open(os.path.join(dest, f), "wb") as out:
            out.write(data)
PY
echo "fetch-protos: P4Runtime protos in $dest"
