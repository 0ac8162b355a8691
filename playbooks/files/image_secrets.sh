#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# Secret scan of a node image (playbooks/image.yml, issue 38): run inside the image, never a node
# (podman run --rm --network none --entrypoint /bin/sh IMAGE -s < image_secrets.sh). Prints every file that is or
# holds a secret: a key, token, password or account file by its name, or any file holding a PEM private key. Exits 1
# when it found one, 0 when none. An image holds no secret: each node gets its own from its personalisation layer.
set -u
dirs=""
for d in /etc /root /home /opt /srv /usr/local /usr/lib/msa-hpc /var/lib /var/spool /var/tmp /tmp; do
  [ -d "$d" ] && dirs="$dirs $d"
done
# shellcheck disable=SC2086 # $dirs is a list of paths without blanks
{
  find $dirs -xdev \( -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/lib/ucf \) -prune -o -type f \( \
      -name munge.key -o -name '*.token' -o -name '*.key' -o -name '*.password' -o -name '*.passwd' -o -name '*.secret' \
      -o -name '.pgpass' -o -name '*.account' -o -name 'ssh_host_*_key' -o -name 'id_rsa' -o -name 'id_ecdsa' -o -name 'id_ed25519' \
      -o -name '*.pem' -path '*/private/*' \) -print 2>/dev/null
  find $dirs -xdev \( -path /var/lib/dpkg -o -path /var/lib/apt \) -prune -o -type f -size -1024k \
      -exec grep -lIs -e '-----BEGIN [A-Z ]*PRIVATE KEY-----' {} + 2>/dev/null
} | sort -u > /tmp/msa-image-secrets
if [ -s /tmp/msa-image-secrets ]; then
  cat /tmp/msa-image-secrets
  exit 1
fi
exit 0
