#!/usr/bin/env bash
# Every benchmark, each printing figures and ratios measured side by side in one run (make bench, make bench-system).
#   scripts/bench.sh all      the benches that need nothing, then those that need a running system, then bench_scale
#   scripts/bench.sh system   only the benches that need a running system
# A bench that cannot run fails the target, unless the person asked for that skip by name:
#   make bench SKIP=bench_scale,bench_routing:opensm   (MSA_BENCH_SKIP, read by tests/bench/_bench_paths.skip)
# The system benches use MSA_BENCH_SYSTEM (make's SYSTEM, default mini): brought up and deployed first when it is not
# running, reused when it is; bench_runner needs the execution environment (make ee), built first when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

WHAT=${1:-all}
SYSTEM=${MSA_BENCH_SYSTEM:-mini}
PY=${MSA_VENV:-$PWD/.venv}/bin/python
SYSTEM_BENCHES=(bench_containers bench_mpi bench_runner bench_submit_options bench_storage)
skipped() { [[ ",${MSA_BENCH_SKIP:-}," == *",$1,"* ]]; }
run() { step "tests/bench/$1.py"; "$PY" "tests/bench/$1.py"; }

case $WHAT in
  all|system) ;;
  *) echo "scripts/bench.sh: unknown set '$WHAT' (all or system)" >&2; exit 2 ;;
esac

if [ "$WHAT" = all ]; then
  for b in tests/bench/bench_*.py; do
    b=$(basename "$b" .py)
    [[ " ${SYSTEM_BENCHES[*]} bench_scale " == *" $b "* ]] || run "$b"
  done
fi

wanted=()
for b in "${SYSTEM_BENCHES[@]}"; do skipped "$b" || wanted+=("$b"); done
if [ ${#wanted[@]} -gt 0 ]; then
  if podman container exists "$SYSTEM-mgmt01" && [ "$(podman inspect -f '{{.State.Running}}' "$SYSTEM-mgmt01")" = true ] \
      && [ -d ".cache/$SYSTEM" ]; then
    step "reusing the running system $SYSTEM"
  else
    step "bringing up and deploying $SYSTEM for the system benches (make sim-up site SYSTEM=$SYSTEM)"
    make --no-print-directory sim-up site SYSTEM="$SYSTEM"
  fi
  if [[ " ${wanted[*]} " == *" bench_runner "* ]] && ! podman image exists "${MSA_EE_IMAGE:-localhost/msa-hpc-ee:0.1.0}"; then
    make --no-print-directory ee
  fi
fi
for b in "${SYSTEM_BENCHES[@]}"; do MSA_BENCH_SYSTEM=$SYSTEM run "$b"; done

[ "$WHAT" = all ] && MSA_BENCH_SCALE=1 run bench_scale
step "benchmarks done"
