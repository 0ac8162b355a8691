# shellcheck shell=bash
# Shared helpers for the bundle's scripts: timestamped progress lines.
step() { printf '[%s] == %s\n' "$(date +%H:%M:%S)" "$*"; }
