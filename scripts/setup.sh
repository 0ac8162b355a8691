#!/usr/bin/env bash
# Set up a fresh Debian 12 host (as root) for msa.hpc: packages, host fixes, the Python venv
# and the node image. Every step is skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

VENV=${MSA_VENV:-$PWD/.venv}
IMAGE=${MSA_IMAGE:-localhost/msa-node:latest}
BASE=localhost/msa-base:trixie

step "apt packages"
# opensm, ibsim-utils, infiniband-diags, libumad2sim0: OpenSM under ibsim, the peer of tests/bench/bench_routing.py
PKGS=(mosquitto postgresql python3-psycopg2 podman runc netavark aardvark-dns debootstrap iproute2 iptables shellcheck python3-venv python3-dev gcc lua5.1 lua-busted git openssh-client rsync
      opensm ibsim-utils infiniband-diags libumad2sim0)
missing=()
for p in "${PKGS[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
if ((${#missing[@]})); then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

step "host fixes for systemd containers (docs/architecture.md §2.3)"
mkdir -p /etc/containers
if ! grep -q 'msa.hpc' /etc/containers/containers.conf 2>/dev/null; then
  cat > /etc/containers/containers.conf <<'CONF'
# written by msa.hpc scripts/setup.sh
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
[network]
network_backend = "netavark"
CONF
fi
sysctl -q -w fs.inotify.max_user_instances=8192 fs.inotify.max_user_watches=1048576
sysctl -q -w net.ipv4.ip_forward=1

step "python venv ($VENV)"
PY=${MSA_PYTHON:-$(command -v python3.11 || command -v python3)}
if [ ! -x "$VENV/bin/python" ]; then "$PY" -m venv "$VENV"; fi
if ! cmp -s requirements.txt "$VENV/.requirements.txt"; then
  "$VENV/bin/pip" install -q --disable-pip-version-check -r requirements.txt
  cp requirements.txt "$VENV/.requirements.txt"
fi

step "node artifacts (requirements-nodes.txt into .cache/artifacts)"
if ! "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps --require-hashes --no-index \
     --find-links .cache/artifacts -d .cache/artifacts -r requirements-nodes.txt >/dev/null 2>&1; then
  "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps --require-hashes -d .cache/artifacts \
    -r requirements-nodes.txt
fi

step "node image ($IMAGE)"
if ! podman image exists "$BASE"; then
  root=$(mktemp -d /var/tmp/msa-rootfs.XXXX)
  debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian >/var/tmp/msa-debootstrap.log 2>&1 \
    || { tail -20 /var/tmp/msa-debootstrap.log; exit 1; }
  tar -C "$root" -c . | podman import - "$BASE" >/dev/null
  rm -rf "$root"
fi
# the SPANK plugin's source (a build context of its own) is part of the image: a change rebuilds it
SPANK=collections/ansible_collections/msa/hpc/roles/slurm/files/spank
sum=$(cat image/Containerfile "$SPANK"/spank_msa.c "$SPANK"/msa_opts.c "$SPANK"/msa_opts.h | sha256sum | cut -c1-16)
if [ "$(podman image inspect -f '{{ index .Labels "msa.hpc.containerfile" }}' "$IMAGE" 2>/dev/null)" != "$sum" ]; then
  podman build -q --label "msa.hpc.containerfile=$sum" --build-context spanksrc="$SPANK" \
    -t "$IMAGE" -f image/Containerfile image >/dev/null
fi
step "setup done"
