#!/usr/bin/env bash
# Build the execution environment (make ee): the base image from ee/Containerfile.base, then the collection's
# execution-environment.yml with the pinned ansible-builder (requirements.txt), in .cache/ee. Nothing is pulled
# from a registry: the base is the debootstrap image of scripts/setup.sh; Python packages come from PyPI.
# Prints the build time and the image size.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

VENV=${MSA_VENV:-$PWD/.venv}
COLL=collections/ansible_collections/msa/hpc
BASE=localhost/msa-ee-base:trixie
IMAGE=${MSA_EE_IMAGE:-localhost/msa-hpc-ee:0.1.0}
BUILD=.cache/ee
SITE_PACKAGES=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# The collections the roles use besides msa.hpc, from the controller's pinned `ansible` release.
DEPS=(community/mysql community/postgresql community/crypto ansible/posix ansible/utils)

start=$(date +%s)
step "EE base image ($BASE from ee/Containerfile.base)"
rm -rf "$BUILD-base"
mkdir -p "$BUILD-base/ca"
cp ee/Containerfile.base ee/pkgmgr "$BUILD-base/"
cp /usr/local/share/ca-certificates/*.crt "$BUILD-base/ca/" 2>/dev/null || true
sum=$(cd "$BUILD-base" && find . -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
if [ "$(podman image inspect -f '{{ index .Labels "msa.hpc.containerfile" }}' "$BASE" 2>/dev/null)" != "$sum" ]; then
  podman build -q --label "msa.hpc.containerfile=$sum" -t "$BASE" -f Containerfile.base "$BUILD-base" >/dev/null
fi

step "build context ($BUILD)"
rm -rf "$BUILD"
mkdir -p "$BUILD/ee-build/ansible_collections"
cp "$COLL/execution-environment.yml" "$BUILD/"
"$VENV/bin/ansible-galaxy" collection build --force --output-path "$BUILD/ee-build" "$COLL" >/dev/null
for dep in "${DEPS[@]}"; do
  mkdir -p "$BUILD/ee-build/ansible_collections/${dep%/*}"
  cp -a "$SITE_PACKAGES/ansible_collections/$dep" "$BUILD/ee-build/ansible_collections/$dep"
  cp -a "$SITE_PACKAGES/ansible_collections/${dep/\//.}"-*.info "$BUILD/ee-build/ansible_collections/" 2>/dev/null || true
done

step "ansible-builder build ($IMAGE)"
(cd "$BUILD" && "$VENV/bin/ansible-builder" build --container-runtime podman -f execution-environment.yml \
  -t "$IMAGE" --context context -v 2) >"$BUILD/build.log" 2>&1 || { tail -40 "$BUILD/build.log"; exit 1; }
size=$(podman image inspect -f '{{ .Size }}' "$IMAGE")
step "EE image $IMAGE built in $(( $(date +%s) - start )) s, $(( size / 1000000 )) MB"
