#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
# The storage roles for real on this host, outside any system: two GlusterFS servers and one client as h36-*
# systemd containers (from the local node image, read only), a test CA, msa.hpc.glusterfs_server and
# msa.hpc.shared_fs applied through podman (site.yml, twice: the second run must change nothing), then
# failover.sh. `run_containers.sh down` removes the containers, the network and the image.
set -euo pipefail
cd "$(dirname "$0")"
PREFIX=h36 NET=h36-storage IMAGE=localhost/h36-gluster:latest BASE=${BASE_IMAGE:-localhost/msa-node:latest}
TLS=${H36_TLS_DIR:-/tmp/h36/tls}
export ANSIBLE_CONFIG=$PWD/ansible.cfg H36_TLS_DIR=$TLS PATH=/work/main/.venv/bin:$PATH

if [ "${1:-}" = down ]; then
  podman rm -f "$PREFIX-gs1" "$PREFIX-gs2" "$PREFIX-cl1" >/dev/null 2>&1 || true
  podman network rm "$NET" >/dev/null 2>&1 || true
  podman rmi "$IMAGE" >/dev/null 2>&1 || true
  exit 0
fi

# The packages are only downloaded into apt's cache: the roles install them.
printf 'FROM %s\nRUN apt-get update && apt-get install -y --download-only glusterfs-server glusterfs-client\n' "$BASE" |
  nice -n 19 podman build -q -t "$IMAGE" -f - . >/dev/null
podman network exists "$NET" || podman network create --internal --disable-dns --subnet 10.236.5.0/24 "$NET" >/dev/null
for n in gs1:11 gs2:12 cl1:21; do
  podman container exists "$PREFIX-${n%%:*}" ||
    nice -n 19 podman run -d --name "$PREFIX-${n%%:*}" --hostname "$PREFIX-${n%%:*}" --privileged --systemd=always \
      --network "$NET:ip=10.236.5.${n##*:}" "$IMAGE" >/dev/null
done

mkdir -p "$TLS"
if [ ! -f "$TLS/ca.pem" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TLS/ca.key" -out "$TLS/ca.pem" -days 30 -subj "/CN=h36 test CA" 2>/dev/null
  for h in sssm01 sssm02 cm01; do
    openssl req -newkey rsa:2048 -nodes -keyout "$TLS/$h.key" -out "$TLS/$h.csr" -subj "/CN=$h" 2>/dev/null
    openssl x509 -req -in "$TLS/$h.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" -CAcreateserial -out "$TLS/$h.crt" -days 30 2>/dev/null
  done
fi

time nice -n 19 ansible-playbook site.yml
second=$(nice -n 19 ansible-playbook site.yml)
echo "$second" | grep -A4 'PLAY RECAP'
if echo "$second" | grep -E '^(sssm|cm)[0-9]+ +:' | grep -qE 'changed=[1-9]|failed=[1-9]'; then
  echo "the second run changed something or failed" >&2; exit 1
fi
nice -n 19 ./failover.sh
