#!/usr/bin/env bash
# make test (and so .ci/run): every suite of `make unit`, `make lint` and `make molecule`, ordered for a small machine.
# The simulated system's checks spend much of their time waiting for jobs, delays and restarts, with the CPU idle
# (vmstat: 60-77 % idle during verify_delay). The suites that wait for nothing and that nothing waits for run beside
# molecule instead of before it, at nice 19 so that the system's services and checks come first:
#   - ansible-lint, ansible-test sanity and units (scripts/lint.sh, as make lint runs them);
#   - tests/test_standalone.py, the collection's check-mode site.yml on its own (the longest pytest file).
# Their output goes to .cache/test-beside.log while molecule runs, and is printed after it, each line prefixed with
# "beside | " (so that stage_times.py counts only this run's own stages), then their own stage times.
# Each suite beside molecule runs even when one before it failed. make test fails when pytest, molecule or any of
# them failed (pytest first: without its pass nothing else starts).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

VENV=${MSA_VENV:-$PWD/.venv}
BESIDE=.cache/test-beside.log
export MSA_VENV=$VENV

step "pytest (all but tests/test_standalone.py, which runs beside molecule)"
"$VENV/bin/python" -m pytest -q -n 2 --dist loadfile --ignore=tests/test_standalone.py

step "lint and tests/test_standalone.py start beside molecule (nice 19; output in $BESIDE, printed after molecule)"
mkdir -p .cache
(
  renice -n 19 -p "$BASHPID" >/dev/null
  failed=0
  bash scripts/lint.sh || failed=1
  step "pytest tests/test_standalone.py"
  "$VENV/bin/python" -m pytest -q tests/test_standalone.py || failed=1
  step "beside molecule: done"
  exit "$failed"
) </dev/null >"$BESIDE" 2>&1 &
beside=$!

rc=0
step "molecule test (default scenario: ${MSA_SYSTEM:-mini})"
"$VENV/bin/molecule" test -s default || rc=$?
if ! bash scripts/check_clean.sh "${MSA_SYSTEM:-mini}" && ((rc == 0)); then rc=1; fi

step "waiting for the suites beside molecule"
beside_rc=0
wait "$beside" || beside_rc=$?
sed 's/^/beside | /' "$BESIDE"
python3 scripts/stage_times.py "$BESIDE" 0 | sed 's/^/beside | /' || true
echo "beside | exit $beside_rc"
if ((rc == 0)); then rc=$beside_rc; fi
exit "$rc"
