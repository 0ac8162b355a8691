#!/usr/bin/python
# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module msa.hpc.slurm_packjob: submit, watch and cancel heterogeneous Slurm jobs across MSA modules."""

DOCUMENTATION = r"""
module: slurm_packjob
short_description: Submit, watch and cancel heterogeneous (pack) Slurm jobs across MSA modules
version_added: 0.1.0
author:
  - msa.hpc maintainers (@msa-hpc)
description:
  - Submits a heterogeneous job whose components run on different modules (partitions) at the same time, as
    C(sbatch) does with C(#SBATCH hetjob) separators (seed 004 §4.2), and reports the job id, state, node list and
    exit code of each component.
  - Asks for the MSA global resources as cluster licences on the first component, so the scheduler never starts a
    job it cannot serve. O(gateways) becomes C(--licenses=gateway:N); O(nam) becomes C(--licenses=nam:U) with U
    the size in GiB rounded up; O(gce) becomes C(--licenses=gce:1). The job comment carries the exact wishes for
    the gateway prolog (C(msa:gw_num=2;gw_file=...;gw_plugin=...;gw_cleanup=1;nam_bytes=...;gce=1)) and the batch
    script exports them as C(MSA_GW_NUM), C(MSA_GW_ROUTING_FILE), C(MSA_GW_PLUGIN), C(MSA_GW_CLEANUP),
    C(MSA_NAM_BYTES) and C(MSA_GCE).
  - A component with O(components[].delay) starts that many minutes after the first component (the delay switch of
    seed 004 §5.2.2). Slurm starts all components of a heterogeneous job together, so a delayed component is
    submitted as its own job with C(--dependency=after:<first job id>+<minutes>); it runs only while the first job
    is still running (it exits 3 otherwise) and is cancelled with it by O(state=absent).
  - O(module_list) gives alternatives of which exactly one runs (seed 004 §5.1.2, C(--module-list)), as one job,
    so there is nothing to arbitrate. When the alternatives differ only in their partition (or module), the job is
    submitted once with their partitions as a partition list, which is the job record C(sbatch --module-list=m1,m2)
    gets from job_submit.lua, and Slurm starts it in whichever partition can start it first. When they differ in shape
    (nodes, time, command, ...), Slurm is asked when each would start (C(sbatch --test-only)); the one with the
    lowest expected slowdown, (expected wait + requested time) / requested time, is submitted, ties going to the
    shorter request (fewer node-minutes). Each alternative then needs a finite C(time). The result's
    RV(estimates) and RV(winner) say which was chosen and why.
  - Idempotent by job name and user. O(state=present) does not submit when a job of this name is pending or
    running for the user; O(state=absent) cancels every such job.
  - Validates the whole request before anything is submitted, against O(system), and fails naming the component
    index, the field and the value.
  - Talks to Slurm through its commands (C(sbatch), C(squeue --json), C(sacct --json), C(scontrol), C(scancel)),
    which must be on the target's PATH, or with O(transport=rest) through slurmrestd (openapi v0.0.38, and
    dbv0.0.38 for finished jobs) with a JWT, so that an AWX job needs no shell on a login node. The results are
    the same either way (job ids, states, node lists, exit codes). slurmrestd v0.0.38 cannot answer a test-only
    submission, so a O(module_list) whose alternatives differ in shape is estimated with C(sbatch --test-only) on the
    target when C(sbatch) is there and submitted over REST, and refused naming O(module_list) when it is not.
attributes:
  check_mode:
    support: full
    details: Validates, looks the job up in the queue, asks Slurm for the start estimates of a module list whose
      alternatives differ in shape (C(sbatch --test-only) submits nothing) and returns the scripts and argv it
      would run.
  diff_mode:
    support: none
extends_documentation_fragment:
  - msa.hpc.attributes
  - msa.hpc.slurmrest
options:
  name:
    description: Job name; with the user it identifies the job for idempotency.
    type: str
    required: true
  state:
    description: V(present) submits unless the job is pending or running; V(absent) cancels it.
    type: str
    choices: [present, absent]
    default: present
  components:
    description:
      - The components of the heterogeneous job, in order. The first one leads; its batch script runs the job.
      - Without O(components[].script) on the first component, every component not delayed needs a
        O(components[].command), and the job runs them as one heterogeneous step, one C(srun) with the commands
        separated by colons and each preceded by its C(--het-group) (or one step each with O(launch=separate)).
    type: list
    elements: dict
    suboptions:
      partition:
        description: Partition to run on. Give this or O(components[].module).
        type: str
      module:
        description: MSA module to run on; resolved to its partition through O(system).
        type: str
      nodes:
        description: Number of nodes.
        type: int
        default: 1
      ntasks:
        description: Number of tasks.
        type: int
      cpus_per_task:
        description: CPUs per task.
        type: int
      time:
        description: Time limit in a Slurm format (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS).
        type: str
      constraint:
        description: Node features (C(--constraint)).
        type: str
      gres:
        description: Generic resources per node, for example V(gpu:1).
        type: str
      command:
        description: Program and arguments as on an srun line (a string is used as written, a list is quoted).
        type: raw
      script:
        description: Batch script body (no C(#SBATCH) lines). Only the first component and delayed ones may have one.
        type: str
      delay:
        description: Minutes after the first component starts (or a Slurm time); not for the first component.
        type: raw
      container_image:
        description:
          - Image (C(name[:tag])) of the nodes' udocker repository to run the component's O(components[].command) in,
            as the submitting user. The command goes through the C(msa-container) wrapper that the C(msa.hpc.udocker)
            role installs on the compute modules (C(srun msa-container IMAGE -- COMMAND)); the container sees the
            user's home and working directory and the node's declared GPU devices, and the step's exit code is the
            command's (125 when the wrapper itself fails, for example an image the node has not imported).
          - The command must start with the program; srun options before it only as C(--name=value). Not with
            O(components[].script); a script calls C(msa-container) itself.
        type: str
  module_list:
    description:
      - Alternatives (same suboptions as O(components), without O(components[].delay)) of which exactly one runs.
        Excludes O(components).
      - Alternatives of different shapes each need a finite O(components[].time), the requested time of the
        expected slowdown.
    type: list
    elements: dict
  launch:
    description: Run the components' commands as one heterogeneous step (V(joint)) or one step each (V(separate)).
    type: str
    choices: [joint, separate]
    default: joint
  gateways:
    description: Gateway nodes for the job (seed 004 C(--gw_num)).
    type: int
    default: 0
  gw_file:
    description:
      - Path of the gateway routing file (C(--gw_file)), absolute or relative to the job's working directory.
      - The prolog writes it as the job's user and only inside the user's home or the job's working directory; a
        path with C(..) is refused here, one outside those directories by the prolog.
    type: path
  gw_plugin:
    description:
      - Routing strategy for the gateway routing file (C(--gw_plugin)) by bare name (letters, digits, C(_), C(-)),
        one of V(balance), V(booster), V(cluster) or a site plugin the administrators installed in C(/etc/msa-gw/routing.d).
      - A path, C(..) or C(module:function) is refused.
    type: str
  gw_cleanup:
    description: Remove the routing file when the job ends (C(--gw_cleanup)).
    type: bool
    default: false
  nam:
    description:
      - NAM capacity for the job, V(100GiB), V(500GB), V(16G) or bytes. K, M, G, T, P and E are powers of 1024 in
        every spelling, as Slurm reads sizes (V(100GB), V(100G) and V(100GiB) are all 100 x 2^30 bytes).
      - The NAM prolog gives the job no more than the C(nam) licences it asks (the size in GiB rounded up).
    type: str
  gce:
    description: Whether the job uses the Global Collective Engine.
    type: bool
    default: false
  account:
    description: Account to charge.
    type: str
  qos:
    description: Quality of service.
    type: str
  chdir:
    description: Working directory of the batch script.
    type: path
  output:
    description: Output file pattern (C(--output)).
    type: str
  environment:
    description: Variables exported in the batch script.
    type: dict
    default: {}
  system:
    description:
      - The system's resources, to validate the request before submitting. C(partitions) maps a partition to
        C(nodes), optional C(max_time), C(module), C(cpus_per_node) and C(gres) (per node, a mapping
        such as C(gpu) to 1); C(gateways) is the number of gateway nodes, C(nam) the NAM capacity, C(gce) whether a GCE
        exists. A key left out is not checked.
    type: dict
    default: {}
  wait:
    description: Wait until every component has finished, and fail if one failed (see O(fail_on_error)).
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait with O(wait=true).
    type: int
    default: 600
  poll_interval:
    description: Seconds between two looks at the queue while waiting.
    type: int
    default: 5
  fail_on_error:
    description: With O(wait=true), fail when a component ends in another state than COMPLETED or with a non-zero exit code.
    type: bool
    default: true
  transport:
    description: Slurm's commands on the target (V(cli)) or slurmrestd (V(rest), needs O(rest_url), O(rest_user), O(rest_token)).
    type: str
    choices: [cli, rest]
    default: cli
  rest_validate_certs:
    description: Verify the TLS certificate of an C(https://) O(rest_url).
    type: bool
    default: true
  rest_chdir:
    description: Working directory of a job submitted over REST without O(chdir) (sbatch would use its own).
    type: path
    default: /tmp
notes:
  - Slurm 22.05 or later; C(--dependency=after:<job>+<minutes>) needs it. Jobs are found by name among the jobs
    C(squeue) still lists; once slurmctld forgets a finished job (C(MinJobAge)), its final state comes from
    C(sacct), which needs accounting (slurmdbd).
  - The cluster needs the licences in C(slurm.conf) (C(Licenses=gateway:N,nam:<GiB>,gce:N)); the
    C(msa.hpc.slurm_nodes_conf) filter renders that line.
seealso:
  - name: Heterogeneous job support
    description: Slurm's documentation of heterogeneous jobs.
    link: https://slurm.schedmd.com/heterogeneous_jobs.html
"""

EXAMPLES = r"""
- name: Run a cluster/booster job through two gateways and wait for it
  msa.hpc.slurm_packjob:
    name: coupled
    components:
      - {partition: cm, nodes: 1, ntasks: 2, time: "10:00", command: ./hello_cluster}
      - {partition: esb, nodes: 2, ntasks: 2, gres: "gpu:1", command: ./hello_booster}
    gateways: 2
    gw_cleanup: true
    system: {partitions: {cm: {nodes: 4}, esb: {nodes: 8}}, gateways: 2}
    wait: true
    wait_timeout: 900
  register: coupled

- name: Start the analysis part 30 minutes after the simulation (delay switch)
  msa.hpc.slurm_packjob:
    name: workflow
    components:
      - {partition: esb, nodes: 4, time: "2:00:00", command: ./simulate}
      - {partition: dam, nodes: 1, time: "1:30:00", delay: 30, command: ./analyse}
    nam: 100GiB

- name: Run on whichever module frees first
  msa.hpc.slurm_packjob:
    name: anywhere
    module_list:
      - {partition: esb, nodes: 4, ntasks: 8, time: 5, command: ./app}
      - {partition: cm, nodes: 2, ntasks: 8, time: 7, command: ./app}
      - {partition: dam, nodes: 1, ntasks: 8, time: 14, command: ./app}

- name: Submit through slurmrestd from AWX (no shell on a login node) and wait for it
  msa.hpc.slurm_packjob:
    name: rest-job
    components:
      - {partition: cm, nodes: 1, time: 5, command: hostname}
    transport: rest
    rest_url: https://mgmt01:6820
    rest_user: alice
    rest_token: "{{ msa_slurm_rest_token }}"
    wait: true

- name: Run the CM part on the host and the ESB part inside an image of the site's store
  msa.hpc.slurm_packjob:
    name: mixed
    components:
      - {partition: cm, nodes: 1, time: "5:00", command: ./pre_process}
      - {partition: esb, nodes: 1, time: "5:00", container_image: "msa-demo:bookworm", command: ./simulate}
    wait: true

- name: Cancel the workflow
  msa.hpc.slurm_packjob:
    name: workflow
    state: absent
"""

RETURN = r"""
job_id:
  description: Id of the first job (the heterogeneous job's leader, or the alternative that runs).
  returned: when a job exists
  type: int
  sample: 1234
job_ids:
  description: Every job id of this job (leader, delayed components, alternatives).
  returned: always
  type: list
  elements: int
state:
  description: Overall state (the first unfinished component's state, else the first failure, else COMPLETED).
  returned: when a job exists
  type: str
  sample: RUNNING
components:
  description: One entry per component (or alternative), in spec order.
  returned: when a job exists
  type: list
  elements: dict
  contains:
    index: {description: Position in the spec., type: int}
    role: {description: "V(main) (part of the heterogeneous job), V(delayed) or V(alternative).", type: str}
    job_id: {description: Slurm job id of the component (C(<leader>+<offset>) in squeue)., type: int}
    het_job_offset: {description: Offset in the heterogeneous job., type: int}
    state: {description: "Slurm job state; V(NOT_CHOSEN) for the alternatives of a module list that do not run.", type: str}
    nodes: {description: Node list as a hostlist expression., type: str}
    node_list: {description: Node names., type: list, elements: str}
    exit_code: {description: Exit code once finished., type: int}
    signal: {description: "Signal that ended it, 0 if none.", type: int}
    chosen: {description: "For alternatives, whether this one runs.", type: bool}
winner:
  description:
    - Index of the module_list alternative that runs, once known (at submission when the alternatives differ in
      shape; when the job starts in one partition of its partition list when they do not).
  returned: with module_list
  type: int
estimates:
  description:
    - The alternatives of a module list that differ in shape, best first, as Slurm estimated them at submission
      (C(sbatch --test-only)); the first is the one submitted.
  returned: when a module list with alternatives of different shapes is submitted
  type: list
  elements: dict
  contains:
    index: {description: Position of the alternative in O(module_list)., type: int}
    partition: {description: The partition Slurm would start it in., type: str}
    start: {description: "Slurm's expected start (controller local time, C(YYYY-MM-DDTHH:MM:SS)).", type: str}
    wait: {description: Expected wait in seconds from submission., type: int}
    slowdown: {description: (wait + requested time) / requested time., type: float}
    node_minutes: {description: Nodes × requested minutes (the tie-break; fewer wins)., type: int}
    error: {description: "Why Slurm said it cannot run (then start, wait and slowdown are null).", type: str}
submissions:
  description: What was (or in check mode would be) run, one entry per sbatch with its argv and script.
  returned: when submitting, and in check mode
  type: list
  elements: dict
cancelled:
  description: Job ids cancelled by state=absent.
  returned: with state=absent
  type: list
  elements: int
"""

import os
import pwd
import shutil
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils.slurm.cli import CliTransport
from ansible_collections.msa.hpc.plugins.module_utils.slurm.model import PackJobError, validate
from ansible_collections.msa.hpc.plugins.module_utils.slurm.modulelist import choose, same_shape
from ansible_collections.msa.hpc.plugins.module_utils.slurm.records import TransportError
from ansible_collections.msa.hpc.plugins.module_utils.slurm.render import estimate_plan, fill_leader, plan
from ansible_collections.msa.hpc.plugins.module_utils.slurm.rest import RestTransport, rest_argument_spec
from ansible_collections.msa.hpc.plugins.module_utils.slurm.results import all_ids, cancel_targets, find_ids, results

_COMPONENT = dict(
    partition=dict(type="str"), module=dict(type="str"), nodes=dict(type="int", default=1),
    ntasks=dict(type="int"), cpus_per_task=dict(type="int"), time=dict(type="str"), constraint=dict(type="str"),
    gres=dict(type="str"), command=dict(type="raw"), script=dict(type="str"), delay=dict(type="raw"),
    container_image=dict(type="str"))
JOB_OPTIONS = ("name", "components", "module_list", "launch", "gateways", "gw_file", "gw_plugin", "gw_cleanup", "nam",
               "gce", "account", "qos", "chdir", "output", "environment")


def argument_spec():
    return dict(
        name=dict(type="str", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        components=dict(type="list", elements="dict"),
        module_list=dict(type="list", elements="dict"),
        launch=dict(type="str", choices=["joint", "separate"], default="joint"),
        gateways=dict(type="int", default=0),
        gw_file=dict(type="path"), gw_plugin=dict(type="str"), gw_cleanup=dict(type="bool", default=False),
        nam=dict(type="str"), gce=dict(type="bool", default=False),
        account=dict(type="str"), qos=dict(type="str"), chdir=dict(type="path"), output=dict(type="str"),
        environment=dict(type="dict", default={}),
        system=dict(type="dict", default={}),
        wait=dict(type="bool", default=False), wait_timeout=dict(type="int", default=600),
        poll_interval=dict(type="int", default=5), fail_on_error=dict(type="bool", default=True),
        transport=dict(type="str", choices=["cli", "rest"], default="cli"),
        **rest_argument_spec(),
        rest_validate_certs=dict(type="bool", default=True),
        rest_chdir=dict(type="path", default="/tmp"),
    )


def _clean_components(items):
    """Drop the None values the argument spec would add, so validation sees only what the user wrote."""
    if items is None:
        return None
    return [{k: v for k, v in item.items() if v is not None} if isinstance(item, dict) else item for item in items]


def job_from_params(params):
    job = {k: params[k] for k in JOB_OPTIONS if params.get(k) not in (None, [], {})}
    for key in ("components", "module_list"):
        if key in job:
            job[key] = _clean_components(job[key])
    if job.get("gw_cleanup") is False:
        del job["gw_cleanup"]
    return job


def _snapshot(transport, spec, ids, user):
    records = transport.jobs(user)
    wanted = set(all_ids(ids))
    seen = {r["job_id"] for r in records} | {r["het_job_id"] for r in records if r["het_job_id"]}
    missing = sorted(wanted - seen)
    if missing:
        try:
            records += transport.history(missing)
        except TransportError:
            pass   # no accounting: those components stay UNKNOWN
    return results(spec, ids, records)


def submit(transport, subs):
    """Run the planned submissions; returns the ids and what was run. Cancels what it submitted on failure."""
    ids = {"leader": None, "delayed": {}, "alternatives": []}
    done, submitted = [], []
    try:
        for sub in subs:
            if sub["role"] == "delayed":
                sub = fill_leader(sub, ids["leader"])
            job_id = transport.submit(sub)
            submitted.append(job_id)
            done.append(dict(sub, job_id=job_id))
            if sub["role"] == "main":
                ids["leader"] = job_id
            elif sub["role"] == "delayed":
                ids["delayed"][sub["components"][0]] = job_id
    except TransportError:
        try:
            transport.cancel(submitted)
        except TransportError:
            pass
        raise
    return ids, done


def wait_for(transport, spec, ids, user, timeout, interval, sleep=None, clock=None):
    sleep, clock = sleep or time.sleep, clock or time.monotonic
    deadline = clock() + timeout
    while True:
        snap = _snapshot(transport, spec, ids, user)
        if snap["finished"] or clock() >= deadline:
            return snap
        sleep(max(1, interval))


def run(module, transport, user, sleep=None, clock=None):
    params = module.params
    try:
        if params["state"] == "absent":   # only the name matters to find what to cancel
            spec = validate({"name": params["name"], "components": [{"partition": "-", "command": "-"}]})
        else:
            spec = validate(job_from_params(params), params["system"])
    except PackJobError as exc:
        module.fail_json(msg="The job %r cannot be submitted: %s" % (params["name"], exc), problems=exc.problems)
    result = dict(changed=False, job_ids=[])
    try:
        if params["state"] == "absent":
            targets = cancel_targets(spec, transport.jobs(user), user)
            if targets and not module.check_mode:
                transport.cancel(targets)
            result.update(changed=bool(targets), cancelled=targets, job_ids=targets)
            return result
        try:
            records = transport.jobs(user)
        except TransportError as exc:
            if not module.check_mode:
                raise
            module.warn("Could not look the job up in the queue (%s); assuming it is not there." % exc)
            records = []
        ids = find_ids(spec, records, user)
        if ids is None:
            chosen = None
            if spec["module_list"] and not same_shape(spec["module_list"]):
                chosen, result["estimates"] = estimate(module, transport, spec)
            subs = plan(spec, chosen=chosen)
            result["submissions"] = [{"role": s["role"], "components": s["components"], "argv": s["argv"],
                                      "script": s["script"]} for s in subs]
            result["changed"] = True
            if module.check_mode:
                return result
            ids, done = submit(transport, subs)
            result["submissions"] = [{"role": s["role"], "components": s["components"], "argv": s["argv"],
                                      "script": s["script"], "job_id": s["job_id"]} for s in done]
        result["job_ids"] = all_ids(ids)
        if params["wait"]:
            snap = wait_for(transport, spec, ids, user, params["wait_timeout"], params["poll_interval"], sleep, clock)
        else:
            snap = _snapshot(transport, spec, ids, user)
    except TransportError as exc:
        module.fail_json(msg="Slurm did not do what was asked for job %r: %s" % (params["name"], exc), **result)
    result.update(job_id=snap["job_id"], state=snap["state"], components=snap["components"])
    if spec["module_list"]:
        result["winner"] = snap["winner"]
    if params["wait"]:
        if not snap["finished"]:
            module.fail_json(msg="Job %r did not finish within %d s; states: %s" % (
                params["name"], params["wait_timeout"], _states(snap)), **result)
        if snap["failed"] and params["fail_on_error"]:
            module.fail_json(msg="Job %r failed: %s" % (params["name"], _states(snap, snap["failed"])), **result)
    return result


def estimate(module, transport, spec, clock=None):
    """Ask Slurm when each alternative of a module list would start; the chosen index and the ranking."""
    estimator = transport if hasattr(transport, "estimate") else None
    if estimator is None and shutil.which("sbatch"):
        estimator = CliTransport(module.run_command)   # REST: slurmrestd v0.0.38 has no test-only submission
    if estimator is None:
        module.fail_json(msg="module_list: the alternatives of %r differ in shape (not only in partition), so Slurm"
                             " must be asked when each would start (sbatch --test-only), which slurmrestd v0.0.38"
                             " cannot answer and sbatch is not on this host: give alternatives that differ only in"
                             " partition, or run the task where sbatch is installed" % spec["name"])
    answers = {}
    for sub in estimate_plan(spec):
        try:
            answers[sub["components"][0]] = estimator.estimate(sub)
        except TransportError as exc:
            answers[sub["components"][0]] = str(exc)
    chosen, ranking = choose(spec["module_list"], answers, (clock or time.time)())
    return chosen, ranking


def _states(snap, only=None):
    return ", ".join("component %d (job %s) %s%s" % (
        c["index"], c["job_id"], c["state"], "" if c["exit_code"] in (None, 0) else " exit %s" % c["exit_code"])
        for c in snap["components"] if only is None or c["index"] in only)


def make_transport(module):
    """The transport the task asked for and the user whose jobs it sees."""
    params = module.params
    if params["transport"] == "cli":
        return CliTransport(module.run_command), pwd.getpwuid(os.getuid()).pw_name
    try:
        return RestTransport(params["rest_url"], params["rest_user"], params["rest_token"],
                             timeout=params["rest_timeout"], validate_certs=params["rest_validate_certs"],
                             ca_path=params["rest_ca_path"], chdir=params["rest_chdir"]), params["rest_user"]
    except TransportError as exc:
        module.fail_json(msg="Slurm's REST API cannot be used: %s" % exc)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True,
                           mutually_exclusive=[("components", "module_list")],
                           required_if=[("state", "present", ("components", "module_list"), True),
                                        ("transport", "rest", ("rest_url", "rest_user", "rest_token"))])
    transport, user = make_transport(module)
    module.exit_json(**run(module, transport, user))


if __name__ == "__main__":
    main()
