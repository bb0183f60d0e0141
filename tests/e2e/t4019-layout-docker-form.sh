#!/usr/bin/env bash
# pull --from DIR runs a registry pull's steps (one skeleton): a model pushed to a layout in
# the Docker v2 form (`push --format docker --to DIR`, an mstore config under the Docker media
# type) is stored in the store's own form, as a registry pull of the same manifest stores it
# (its config under MT_CONFIG, the received bytes as a source-manifest layer), and a push back
# gives the received bytes, same digest. Before, the layout pull stored the Docker form as
# received, which the runtime refuses ("config media type").
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/hf"
expect_ok mstore import "$WORK/hf" --name tiny
expect_ok mstore push --format docker tiny --to "$WORK/oci"
ddigest=${out##* }

export MSTORE_HOME=$WORK/home2
expect_ok mstore pull --from "$WORK/oci" tiny
contains "$out" "pulled tiny:latest $ddigest"
"$PY" - "$MSTORE_HOME/index.db" <<'PYEOF' || fail "the pulled docker form is not in the store's form"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
(mt,) = db.execute("SELECT b.media_type FROM names n JOIN manifests m ON m.digest = n.manifest_digest "
                   "JOIN blobs b ON b.digest = m.config_digest").fetchone()
assert mt == "application/vnd.mstore.model.config.v1+json", mt
(k,) = db.execute("SELECT COUNT(*) FROM names n JOIN layers l ON l.manifest_digest = n.manifest_digest "
                  "WHERE l.media_type = 'application/vnd.mstore.source.manifest'").fetchone()
assert k == 1, k
PYEOF
expect_ok mstore push tiny --to "$WORK/oci2"
contains "$out" "$ddigest"
expect_ok mstore verify
echo "ok $TEST_NAME"
