#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Runs inside a throw-away container of the node image (scripts/slurm_next.sh), with the local repository mounted
# at /repo: works out which of forky's packages Slurm $SLURM_NEXT_VERSION needs on this image, refuses the set when
# it would replace trixie's C library or systemd or remove a package, downloads it (apt checks every file against
# the signed index) and writes the repository's index. Everything else comes from trixie.
set -euo pipefail
V=${SLURM_NEXT_VERSION:?}
export DEBIAN_FRONTEND=noninteractive
# check-valid-until=no: the mirror's cache served a forky Release file 22 days past its Valid-Until (measured);
# the signature and the hashes are still checked. forky is pinned below trixie: only what is named comes from it.
printf 'deb http://deb.debian.org/debian trixie main\ndeb http://deb.debian.org/debian-security trixie-security main\ndeb [check-valid-until=no] http://deb.debian.org/debian forky main\n' > /etc/apt/sources.list
printf 'Package: *\nPin: release n=forky\nPin-Priority: 100\n' > /etc/apt/preferences.d/forky
apt-get update -q >/dev/null
# The node image's Slurm packages at the new version, and the packages whose version Slurm's require: forky's
# slurmd needs libhwloc15 >= 2.15, and trixie's libhwloc-plugins (which libpmix2t64 needs) stays at 2.12 unless
# named, so apt would remove Open MPI instead.
mapfile -t slurm < <(dpkg-query -W -f '${Package} ${source:Package} ${db:Status-Status}\n' \
  | awk '$2 == "slurm-wlm" && $3 == "installed" {print $1}')
want=()
for p in "${slurm[@]}"; do want+=("$p=$V"); done
for p in libhwloc15 libhwloc-plugins libhwloc-dev; do
  dpkg-query -W -f '${db:Status-Status}' "$p" 2>/dev/null | grep -q '^installed' && want+=("$p/forky")
done
sim=$(apt-get install -s -q --no-install-recommends "${want[@]}")
if grep -q '^Remv' <<<"$sim"; then
  grep '^Remv' <<<"$sim"; echo "slurm_next_repo: installing ${want[*]} would remove the packages above" >&2; exit 1
fi
# apt names a package's source by origin and archive ("Debian:testing" while forky is testing)
archive=$(apt-cache policy | sed -n 's/.* o=Debian,a=\([^,]*\),n=forky,.*/\1/p' | head -1)
[ -n "$archive" ] || { echo "slurm_next_repo: no forky archive in apt's sources" >&2; exit 1; }
mapfile -t forky < <(sed -n "s/^Inst \([^ ]*\) .*(\([^ ]*\) Debian:$archive .*/\1=\2/p" <<<"$sim")
for pv in "${forky[@]}"; do
  case ${pv%%=*} in
    libc6|libc-bin|libc-dev-bin|libc6-dev|systemd|systemd-sysv|libsystemd0|libsystemd-shared|libudev1|init-system-helpers)
      echo "slurm_next_repo: Slurm $V would replace trixie's ${pv%%=*} by forky's ${pv#*=}; build it from source instead" >&2
      exit 1;;
  esac
done
# the SPANK plugin's build stage compiles against this release's headers
forky+=("libslurm-dev=$V" "libslurm45t64=$V")
echo "from forky: ${forky[*]}"
cd /repo
rm -f ./*.deb Packages Packages.gz install.list
apt-get download -q -o APT::Sandbox::User=root "${forky[@]}" >/dev/null
# what the image installs: each package named above, at the version that was resolved
for w in "${want[@]}"; do
  case $w in */forky) printf '%s\n' "${forky[@]}" | grep -m1 "^${w%/forky}=";; *) echo "$w";; esac
done > install.list
echo "libslurm-dev=$V" >> install.list  # the SPANK build stage's only
# dpkg-dev is not in the node image; dpkg-scanpackages' work is done here with dpkg-deb and the file hashes
for deb in ./*.deb; do
  dpkg-deb -f "$deb"
  printf 'Filename: %s\nSize: %s\nSHA256: %s\n\n' "$deb" "$(stat -c %s "$deb")" "$(sha256sum "$deb" | cut -d' ' -f1)"
done > Packages
gzip -9nk Packages
ls -l /repo
