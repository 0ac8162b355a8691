#!/usr/bin/env bash
# Run a playbook as AWX does (make runner): ansible-runner (pinned in requirements.txt) with a private data directory,
# inside the execution environment container built by `make ee`, against a (simulated) system.
#   scripts/runner.sh <system> [playbook, default playbooks/site.yml] [site, default example]
#   MSA_RUNNER_TAGS=common,monitoring scripts/runner.sh ...   runs only the plays of those tags (a job template's tags)
# The private data directory .cache/runner/<system>/ holds what AWX would put there:
#   project/    the bundle's playbooks, bundle roles, inventory layers and ansible.cfg (a project sync); the msa.hpc
#               collection and the collections it uses come from the EE, not from the project
#   env/ssh_key the Machine credential (the bundle's SSH key); runner loads it into an ssh-agent in the container
#   env/extravars the survey's answers: MSA_RUNNER_EXTRAVARS (JSON), none by default, as the deploy job template
#               (docs/awx/job_templates.yml) has no survey: its variables come from the inventory layers
#   env/envvars what the job template injects as environment: where the bundle is, the EE's collections, and no
#               colour (runner gives ansible a terminal, so it would colour the recap that callers parse)
#   env/settings process isolation in the EE image with podman, host network (the nodes' management addresses),
#               as root: the EE image's default user 1000 cannot read the private data directory root made
# The system's state directory (.cache/<system>: known_hosts, generated secrets, BMC CA) is mounted in as the
# project's .cache/<system>, as a credential's injected files would be: the secrets never enter the project copy.
# The three inventory layers, lowest precedence first: env/cmdline passes the bundle's common.yml and the system's
# layer (-i each), and runner appends its private inventory/ (-i /runner/inventory), which holds the site's layer.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

SYSTEM=${1:?usage: scripts/runner.sh <system> [playbook] [site]}
PLAYBOOK=${2:-playbooks/site.yml}
SITE=${3:-example}
VENV=${MSA_VENV:-$PWD/.venv}
IMAGE=${MSA_EE_IMAGE:-localhost/msa-hpc-ee:0.1.0}
PDD=$PWD/.cache/runner/$SYSTEM

[ -d "inventories/systems/$SYSTEM" ] || { echo "no system layer inventories/systems/$SYSTEM" >&2; exit 2; }
[ -d ".cache/$SYSTEM" ] || { echo "no state of $SYSTEM in .cache/$SYSTEM: make sim-up SYSTEM=$SYSTEM first" >&2; exit 2; }
podman image exists "$IMAGE" || { echo "no EE image $IMAGE: make ee first" >&2; exit 2; }

step "private data directory $PDD"
mkdir -p "$PDD/project" "$PDD/env"
rm -rf "$PDD/artifacts"
rsync -a --delete --exclude /.venv --exclude /.cache --exclude /.git --exclude /collections --exclude __pycache__ \
  --exclude /tests --exclude /molecule ./ "$PDD/project/"
mkdir -p "$PDD/project/.cache/$SYSTEM"
install -m 0600 .cache/ssh/id_ed25519 "$PDD/env/ssh_key"
printf '%s\n' "${MSA_RUNNER_EXTRAVARS:-"{}"}" > "$PDD/env/extravars"
rm -rf "$PDD/inventory"
cp -a "inventories/sites/$SITE" "$PDD/inventory"
printf '%s' "-i common.yml -i inventories/systems/$SYSTEM${MSA_RUNNER_TAGS:+ --tags $MSA_RUNNER_TAGS}" > "$PDD/env/cmdline"
cat > "$PDD/env/envvars" <<JSON
{"MSA_BUNDLE_DIR": "/runner/project",
 "ANSIBLE_COLLECTIONS_PATH": "/usr/share/ansible/collections",
 "ANSIBLE_FORCE_COLOR": "0",
 "ANSIBLE_NOCOLOR": "1"}
JSON
cat > "$PDD/env/settings" <<JSON
{"process_isolation": true,
 "process_isolation_executable": "podman",
 "container_image": "$IMAGE",
 "container_options": ["--network=host", "--user=root"],
 "container_volume_mounts": ["$PWD/.cache/$SYSTEM:/runner/project/.cache/$SYSTEM",
                             "$PWD/.cache/artifacts:/runner/project/.cache/artifacts:ro"],
 "suppress_ansible_output": false}
JSON

step "ansible-runner run $PLAYBOOK on $SYSTEM in $IMAGE"
rc=0
# the job's ident names its artifacts and its container (ansible_runner_<ident>): one per system
"$VENV/bin/ansible-runner" run "$PDD" -p "$PLAYBOOK" --ident "$SYSTEM" || rc=$?
step "ansible-runner: rc=$rc, status $(cat "$PDD/artifacts/$SYSTEM/status" 2>/dev/null || echo unknown)"
exit "$rc"
