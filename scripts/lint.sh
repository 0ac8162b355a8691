#!/usr/bin/env bash
# make lint, and the lint part of make test (scripts/test.sh): ansible-lint (production profile), then ansible-test
# sanity and units of the collection. Each runs even when one before it failed; the exit status says whether any did.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
VENV=${MSA_VENV:-$PWD/.venv}
export MSA_VENV=$VENV
failed=0
step "ansible-lint (production profile, .ansible-lint)"
"$VENV/bin/ansible-lint" --profile production -c .ansible-lint || failed=1
bash scripts/sanity.sh || failed=1
bash scripts/units.sh || failed=1
exit "$failed"
