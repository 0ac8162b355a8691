#!/usr/bin/env bash
# Generate the collection's reference pages (one per module, plugin and role) into
# collections/ansible_collections/msa/hpc/docs/generated/ from ansible-doc --json. Built output: not committed.
# --readme rewrites the content list of the collection's README.md (committed; tests/test_collection_docs.py fails when
# it is stale), --check-readme only compares it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
VENV=${MSA_VENV:-$PWD/.venv}
step "msa.hpc reference pages"
"$VENV/bin/python" collections/ansible_collections/msa/hpc/docs/generate.py --ansible-doc "$VENV/bin/ansible-doc" "$@"
