#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# make image-slurm-26.05: the node image with Slurm 26.05 (localhost/msa-node:slurm-26.05), for the upgrade
# rehearsal 24.11 -> 26.05 (docs/slurm_releases.md, "Slurm 26.05 on trixie"). From nothing: the node image
# (scripts/setup.sh), forky's Slurm packages into the local repository .cache/slurm-26.05
# (image/slurm_next_repo.sh, in a throw-away container of the node image), then image/Containerfile.slurm-26.05.
# Each step is skipped when its inputs did not change. Not part of make test. Arguments go to podman build
# (e.g. --no-cache).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

VERSION=${MSA_SLURM_NEXT_VERSION:-26.05.5-1}
NODE=${MSA_IMAGE:-localhost/msa-node:latest}
IMAGE=${MSA_SLURM_NEXT_IMAGE:-localhost/msa-node:slurm-${VERSION%.*-*}}
REPO=${MSA_SLURM_NEXT_REPO:-.cache/slurm-${VERSION%.*-*}}
NAME=${MSA_SLURM_NEXT_CONTAINER:-msa-slurm-next-repo}
SPANK=collections/ansible_collections/msa/hpc/roles/slurm/files/spank

start=$(date +%s)
if [ -z "${MSA_SLURM_NEXT_NO_SETUP:-}" ]; then bash scripts/setup.sh; fi
node_id=$(podman image inspect -f '{{ .Id }}' "$NODE")

step "local repository $REPO (forky's Slurm $VERSION for $NODE)"
mkdir -p "$REPO"
repo_sum=$(sha256sum < image/slurm_next_repo.sh | cut -c1-16)-$VERSION-${node_id:0:16}
if [ "$(cat "$REPO/.inputs" 2>/dev/null)" != "$repo_sum" ] || [ ! -s "$REPO/Packages" ]; then
  rm -f "$REPO/.inputs"
  podman run --rm --name "$NAME" -e SLURM_NEXT_VERSION="$VERSION" -v "$PWD/$REPO":/repo:Z \
    -v "$PWD/image/slurm_next_repo.sh":/slurm_next_repo.sh:ro,Z "$NODE" bash /slurm_next_repo.sh \
    >"$REPO/.fetch.log" 2>&1 || { tail -30 "$REPO/.fetch.log"; exit 1; }
  grep '^from forky:' "$REPO/.fetch.log"
  echo "$repo_sum" > "$REPO/.inputs"
else
  echo "unchanged ($(grep -c '^Package:' "$REPO/Packages") packages)"
fi

step "image $IMAGE (image/Containerfile.slurm-26.05)"
pkgs_sum=$(sha256sum "$REPO/Packages" | cut -c1-16)
sum=$(cat image/Containerfile.slurm-26.05 "$REPO/Packages" "$SPANK"/spank_msa.c "$SPANK"/msa_opts.c "$SPANK"/msa_opts.h \
      <(echo "$node_id") | sha256sum | cut -c1-16)
if [ "$(podman image inspect -f '{{ index .Labels "msa.hpc.containerfile" }}' "$IMAGE" 2>/dev/null)" != "$sum" ]; then
  podman build -q --label "msa.hpc.containerfile=$sum" --build-arg SLURMREPO_SUM="$pkgs_sum" \
    --build-context slurmrepo="$REPO" --build-context spanksrc="$SPANK" \
    -t "$IMAGE" -f image/Containerfile.slurm-26.05 "$@" image >/dev/null
else
  echo "unchanged"
fi
size=$(podman image inspect -f '{{ .Size }}' "$IMAGE")
step "$IMAGE: $(podman run --rm --name "$NAME" "$IMAGE" slurmctld -V) in $(( $(date +%s) - start )) s, $(( size / 1000000 )) MB"
