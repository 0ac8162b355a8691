#!/usr/bin/env bash
# ansible-test sanity and units for the collection, offline: ansible-test bootstraps pip in
# each test venv with a cached get-pip script it would otherwise download; a stand-in that uses ensurepip
# and the package index takes its place.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
VENV=${MSA_VENV:-$PWD/.venv}
PY=$VENV/bin/python
pip_version=$("$PY" - <<'PY'
import re, ansible_test, pathlib
src = pathlib.Path(ansible_test.__file__).parent.joinpath("_internal/python_requirements.py").read_text()
print(re.search(r"pip='([0-9.]+)'", src).group(1))
PY
)
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
if [ ! -s "$cache" ]; then
  mkdir -p "$(dirname "$cache")"
  cat > "$cache" <<'PY'
"""Offline stand-in for get-pip.py (msa.hpc scripts/sanity.sh): ensurepip, then the requested pip."""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
subprocess.check_call([sys.executable, "-m", "pip", "install", "--upgrade"] + args)
subprocess.call([sys.executable, "-m", "pip", "uninstall", "-y", "-q", "setuptools"])
PY
fi
cd collections/ansible_collections/msa/hpc
step "ansible-test sanity (ansible-core $("$PY" -c 'from ansible.release import __version__; print(__version__)'), Python $("$PY" -c 'import sys;print("%d.%d" % sys.version_info[:2])'))"
PATH=$VENV/bin:$PATH "$VENV/bin/ansible-test" sanity --venv --python 3.11 --color no "$@"
