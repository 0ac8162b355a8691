#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
# The replicated volume survives a server's loss, on the h36-* test containers (after site.yml): the client writes
# through its GlusterFS mount while h36-gs1 (the first server, which also served its volume file) is stopped, writes
# again with one server, remounts from the backup volume-file server, and the files heal onto h36-gs1 when it is back.
set -euo pipefail
client=${CLIENT:-h36-cl1} down=${DOWN:-h36-gs1} up=${UP:-h36-gs2}
on() { podman exec "$client" bash -c "$1"; }
run=$(date +%s)   # each run's own file names, so an earlier run's files prove nothing
stamp() { date -u +%H:%M:%S.%N | cut -c1-12; }

echo "$(stamp) before: write 64 MiB through /scratch"
on 'dd if=/dev/urandom of=/scratch/before.'"$run"' bs=1M count=64 status=none && cd /scratch && sha256sum before.'"$run"' > /tmp/sums'
echo "$(stamp) during: 256 MiB write started, $down stopped 2 s into it"
on 'dd if=/dev/urandom of=/scratch/during.'"$run"' bs=1M count=256 conv=fsync status=none; echo "dd exit $?" > /tmp/during.rc; cd /scratch && sha256sum during.'"$run"' >> /tmp/sums' &
writer=$!
sleep 2
t0=$(date +%s.%N)
podman stop -t 5 "$down" >/dev/null
echo "$(stamp) $down stopped"
wait $writer
t1=$(date +%s.%N)
on 'cat /tmp/during.rc'
echo "$(stamp) the write ended $(echo "$t1 - $t0" | bc) s after the stop"
echo "$(stamp) after: a new file with one server, then a remount (volume file from the backup server)"
on 'echo after > /scratch/after.'"$run"' && cd /scratch && sha256sum after.'"$run"' >> /tmp/sums'
# shellcheck disable=SC2016 # expanded in the container
on 'systemctl stop scratch.mount; s=$(date +%s); systemctl start scratch.mount; echo "remount exit $? after $(( $(date +%s) - s )) s"'
on 'grep " /scratch " /proc/self/mountinfo | grep -v autofs | cut -d" " -f5,9 && cd /scratch && sha256sum -c /tmp/sums'
echo "$(stamp) the surviving brick holds them:"
podman exec "$up" ls -l /srv/glusterfs/scratch/brick
echo "$(stamp) $down back; waiting for the self-heal"
podman start "$down" >/dev/null
for i in $(seq 1 60); do
  if info=$(podman exec "$down" gluster volume heal scratch info 2>/dev/null) &&
     [ "$(echo "$info" | grep -c 'Number of entries: 0')" = 2 ] &&
     podman exec "$down" test -f "/srv/glusterfs/scratch/brick/after.$run"; then
    echo "$(stamp) healed after ${i}x2 s:"; break
  fi
  sleep 2
done
podman exec -i "$down" bash -c 'cd /srv/glusterfs/scratch/brick && sha256sum -c' < <(podman exec "$client" cat /tmp/sums)
