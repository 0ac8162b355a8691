#!/usr/bin/env bash
# ansible-test units for the collection (tests/unit) on the bundle's venv, as a collection user would run them:
# ansible-test puts only the collection root and ansible on PYTHONPATH; the collection's tests import nothing of the
# bundle (the module tests against a stand-in service live in the bundle's tests/sim/). --requirements installs
# ansible-test's unit-test requirements (pytest-xdist, pytest-mock, mock) into the venv when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
VENV=${MSA_VENV:-$PWD/.venv}
PY=$VENV/bin/python
cd collections/ansible_collections/msa/hpc
step "ansible-test units (ansible-core $("$PY" -c 'from ansible.release import __version__; print(__version__)'), Python $("$PY" -c 'import sys;print("%d.%d" % sys.version_info[:2])'))"
PATH=$VENV/bin:$PATH "$VENV/bin/ansible-test" units --local --requirements --python 3.11 --color no "$@"
