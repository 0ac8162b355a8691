#!/usr/bin/env bash
# After sim_down (molecule's last step): nothing of the simulated system may remain on the host -
# no container, no podman network, no host-side veth or bridge, no network namespace, no BMC address, no
# recorded host keys.
set -euo pipefail
system=${1:-mini}
left=()
mapfile -t c < <(podman ps -a --filter "label=msa.system=$system" --format '{{.Names}}')
((${#c[@]})) && left+=("containers: ${c[*]}")
mapfile -t n < <(podman network ls --format '{{.Name}}' | grep "^$system-" || true)
((${#n[@]})) && left+=("networks: ${n[*]}")
# a host veth left behind would still name its (gone) bridge as master; bridges are named after the networks
bridges=$(podman network ls --format '{{.NetworkInterface}}' 2>/dev/null | sort -u | tr '\n' ' ')
mapfile -t v < <(ip -o link show type veth | awk -F': ' '{print $2}' | cut -d@ -f1 | while read -r dev; do
  master=$(ip -o link show "$dev" | grep -o 'master [^ ]*' | cut -d' ' -f2 || true)
  [[ -z "$master" || " $bridges " != *" $master "* ]] && echo "$dev"; done)
((${#v[@]})) && left+=("veths without a live bridge: ${v[*]}")
mapfile -t ns < <(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^($system|emptest)" || true)
((${#ns[@]})) && left+=("netns: ${ns[*]}")
known_hosts="$(dirname "$0")/../.cache/$system/known_hosts"
[[ -e "$known_hosts" ]] && left+=("host keys: $known_hosts")
if ((${#left[@]})); then printf 'sim_down left behind: %s\n' "${left[@]}"; exit 1; fi
echo "sim_down left nothing of '$system' behind (containers, networks, veths, netns, host keys)"
