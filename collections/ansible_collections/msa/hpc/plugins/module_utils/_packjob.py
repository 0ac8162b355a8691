# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Heterogeneous (pack) jobs on MSA modules: validation, sbatch scripts, delay switch, module lists, job state."""

import json
import re
import shlex
import time

from ansible_collections.msa.hpc.plugins.module_utils import _jobopts as J
from ansible_collections.msa.hpc.plugins.module_utils._hostlist import HostlistError, expand
from ansible_collections.msa.hpc.plugins.module_utils._slurm_conf import (
    LICENSE_GATEWAY, LICENSE_GCE, LICENSE_NAM, NAM_LICENSE_UNIT_NAME, format_time, nam_units, parse_gres,
    parse_size, parse_time)

# --- What a job carries for the gateway, NAM and GCE side -------------------------------------------------------
# The job comment is the one field Slurm hands to PrologSlurmctld/EpilogSlurmctld (SLURM_JOB_COMMENT) and shows in
# squeue/scontrol/sacct, so the gateway prolog reads the job's wishes from it:
#     msa:gw_num=2;gw_file=/home/u/route;gw_plugin=lru;gw_cleanup=1;nam_bytes=107374182400;gce=1
# (parse it with parse_comment). Slurm propagates --comment to every hetjob component; act on HetJobOffset 0 only.
# The batch script exports the same values, so MPI and the job's own tools see them.
COMMENT_PREFIX = J.PREFIX
# job option -> (comment key, environment variable in the batch script, the psgw SPANK option of seed 004 §4.2.1)
GATEWAY_OPTIONS = {
    "gateways": ("gw_num", "MSA_GW_NUM", "--gw_num"),
    "gw_file": ("gw_file", "MSA_GW_ROUTING_FILE", "--gw_file"),
    "gw_plugin": ("gw_plugin", "MSA_GW_PLUGIN", "--gw_plugin"),
    "gw_cleanup": ("gw_cleanup", "MSA_GW_CLEANUP", "--gw_cleanup"),
}
NAM_COMMENT_KEY, NAM_ENV = "nam_bytes", "MSA_NAM_BYTES"   # exact size; the licence count is rounded up to GiB
GCE_COMMENT_KEY, GCE_ENV = "gce", "MSA_GCE"
NOT_CHOSEN = "NOT_CHOSEN"        # state of the alternatives of a module list other than the one that runs
# delayed components: msa:delay=<min>;delay_after=<leader job id>;component=<i>, the keys job_submit.lua writes for
# --delay, so the controller's delay hook (module_utils/node/delay_hooks) reserves their nodes alike
DELAY_COMMENT_KEY = "delay_after"
LEGACY_DELAY_KEY = "delay_of"    # what slurm_packjob wrote before (jobs still queued across an upgrade)
LEADER_PLACEHOLDER = "%LEADER_JOB_ID%"   # in delayed scripts/argv until the first job has an id

ACTIVE_STATES = frozenset(("PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "RESIZING", "REQUEUED",
                           "REQUEUE_FED", "REQUEUE_HOLD", "SIGNALING", "STAGE_OUT", "STOPPED", "SPECIAL_EXIT"))
FINAL_STATES = frozenset(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                          "DEADLINE", "OUT_OF_MEMORY", "REVOKED"))
NO_VAL_LIMIT = 0xFFFFFFF0   # Slurm's NO_VAL/INFINITE markers in 32-bit fields

JOB_KEYS = ("name", "components", "module_list", "gateways", "gw_file", "gw_plugin", "gw_cleanup", "nam", "gce",
            "account", "qos", "chdir", "output", "environment", "launch")
COMPONENT_KEYS = ("partition", "module", "nodes", "ntasks", "cpus_per_task", "time", "constraint", "gres",
                  "command", "script", "delay", "container_image")
LAUNCH_MODES = ("joint", "separate")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# container_image: a component's command runs through this wrapper on the nodes (role msa.hpc.udocker), inside an
# image of the node's udocker repository, as the submitting user; srun's exit code is the command's.
CONTAINER_WRAPPER = "msa-container"
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/-]{0,127}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$")
_SRUN_OPTIONS = re.compile(r"^\s*((?:--[A-Za-z][A-Za-z0-9-]*=[^\s'\"]+\s+)*)")


class PackJobError(ValueError):
    """A job spec that cannot be submitted; ``problems`` has one sentence per fault, naming field and value."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


class TransportError(RuntimeError):
    """A Slurm command or REST call that failed; the message says which and why."""


# --- comment -------------------------------------------------------------------------------------------------------

def format_comment(fields):
    """``msa:key=value;…`` in the order given (the codec of module_utils/_jobopts refuses what it cannot carry)."""
    return J.format_options(fields)


def parse_comment(text):
    """The ``msa:`` fields of a job comment as a dict (``{}`` for a comment written by someone else or malformed)."""
    try:
        return J.parse_msa(text)
    except J.JobOptionError:
        return {}


# --- validation ----------------------------------------------------------------------------------------------------

def _plain(value, where, problems, allow_space=False):
    """A string that can sit on an #SBATCH line (and, without spaces, in the comment)."""
    if value is None:
        return None
    text = str(value)
    bad = "\n\r" if allow_space else "\n\r\t ;"
    if not text or any(c in bad for c in text):
        problems.append("%s: %r is empty or holds a character it cannot carry (%s)"
                        % (where, value, "a new line" if allow_space else "white space or ';'"))
        return None
    return text


def _count(value, where, problems, minimum):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (
            isinstance(value, str) and not re.match(r"^\s*\d+\s*$", value)):
        problems.append("%s: %r is not a whole number" % (where, value))
        return None
    number = int(value)
    if number < minimum:
        problems.append("%s: %r is below %d" % (where, value, minimum))
        return None
    return number


def _bool(value, where, problems):
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("yes", "true", "1", "on"):
        return True
    if text in ("no", "false", "0", "off"):
        return False
    problems.append("%s: %r is not a boolean" % (where, value))
    return False


def _system_partitions(system):
    raw = (system or {}).get("partitions")
    if raw is None:
        return None
    if isinstance(raw, list):
        raw = {p.get("name"): p for p in raw if isinstance(p, dict)}
    parts = {}
    for name, part in raw.items():
        part = part if isinstance(part, dict) else {"nodes": part}
        entry = {"name": name, "module": part.get("module", name), "nodes": part.get("nodes"),
                 "cpus_per_node": part.get("cpus_per_node"), "gres": part.get("gres")}
        try:
            entry["max_time"] = parse_time(part["max_time"]) if part.get("max_time") is not None else None
        except ValueError:
            entry["max_time"] = None
        parts[name] = entry
    return parts


def _component(raw, where, parts, problems, allow_delay):
    if not isinstance(raw, dict):
        problems.append("%s: must be a mapping with partition, nodes, …" % where)
        return None
    for key in raw:
        if key not in COMPONENT_KEYS:
            problems.append("%s.%s: unknown field (known: %s)" % (where, key, ", ".join(COMPONENT_KEYS)))
    comp = {"container_image": None}
    partition, module = raw.get("partition"), raw.get("module")
    if partition is None and module is None:
        problems.append("%s.partition: missing (give partition or module)" % where)
    elif partition is not None and module is not None:
        problems.append("%s.module: give partition or module, not both (partition %r, module %r)"
                        % (where, partition, module))
    field, ref = ("partition", partition) if partition is not None else ("module", module)
    part = None
    if ref is not None:
        if parts is None:
            comp["partition"] = str(ref)
        else:
            part = parts.get(ref) if field == "partition" else (
                parts.get(ref) or next((p for p in parts.values() if p["module"] == ref), None))
            if part is None:
                problems.append("%s.%s: %r is not a %s of this system (known: %s)" % (
                    where, field, ref, field, ", ".join(sorted(parts if field == "partition" else
                                                               {p["module"] for p in parts.values()})) or "none"))
            else:
                comp["partition"] = part["name"]
    comp["nodes"] = _count(raw.get("nodes", 1), where + ".nodes", problems, 1)
    if part is not None and comp["nodes"] is not None and part.get("nodes") is not None \
            and comp["nodes"] > int(part["nodes"]):
        problems.append("%s.nodes: %d asked but %s %r has only %d nodes"
                        % (where, comp["nodes"], field, ref, int(part["nodes"])))
    comp["ntasks"] = _count(raw.get("ntasks"), where + ".ntasks", problems, 1)
    comp["cpus_per_task"] = _count(raw.get("cpus_per_task"), where + ".cpus_per_task", problems, 1)
    if comp["ntasks"] is not None and comp["nodes"] is not None and comp["ntasks"] < comp["nodes"]:
        problems.append("%s.ntasks: %d tasks cannot spread over %d nodes" % (where, comp["ntasks"], comp["nodes"]))
    if part is not None and part.get("cpus_per_node") and None not in (comp["nodes"],):
        need = (comp["ntasks"] or comp["nodes"]) * (comp["cpus_per_task"] or 1)
        have = comp["nodes"] * int(part["cpus_per_node"])
        if need > have:
            problems.append("%s.cpus_per_task: %d CPUs asked (ntasks × cpus_per_task) but %d nodes of %r have %d"
                            % (where, need, comp["nodes"], comp["partition"], have))
    comp["time"] = None
    if raw.get("time") is not None:
        try:
            minutes = parse_time(raw["time"])
            comp["time"] = str(raw["time"]).strip()
            comp["time_minutes"] = minutes
            if part is not None and part.get("max_time") is not None and (minutes is None or minutes > part["max_time"]):
                problems.append("%s.time: %r is longer than the MaxTime %s of partition %r"
                                % (where, raw["time"], format_time(part["max_time"]), comp["partition"]))
        except ValueError as exc:
            problems.append("%s.time: %s" % (where, exc))
    comp["constraint"] = _plain(raw.get("constraint"), where + ".constraint", problems)
    comp["gres"] = None
    if raw.get("gres") not in (None, ""):
        try:
            gres = parse_gres(raw["gres"])
            comp["gres"] = ",".join("%s:%s%d" % (n, (t + ":") if t else "", c) for n, t, c in gres)
            have = (part or {}).get("gres")
            if isinstance(have, dict):
                for name, _t, number in gres:
                    if int(have.get(name, 0)) < number:
                        problems.append("%s.gres: %r asks %d %s per node but %r nodes have %s"
                                        % (where, raw["gres"], number, name, comp["partition"], have.get(name, 0)))
        except ValueError as exc:
            problems.append("%s.gres: %s" % (where, exc))
    command = raw.get("command")
    if isinstance(command, (list, tuple)):
        command = " ".join(shlex.quote(str(a)) for a in command) if command else None
    if command is not None and (not str(command).strip() or "\n" in str(command)):
        problems.append("%s.command: %r must be one non-empty line (use script for more)" % (where, command))
        command = None
    comp["command"] = command
    script = raw.get("script")
    if script is not None:
        script = str(script)
        sbatch_lines = [n + 1 for n, line in enumerate(script.splitlines()) if line.lstrip().startswith("#SBATCH")]
        if sbatch_lines:
            problems.append("%s.script: line %d holds an #SBATCH directive; give resources as fields instead"
                            % (where, sbatch_lines[0]))
        if not script.strip():
            problems.append("%s.script: is empty" % where)
    comp["script"] = script
    if command is not None and script is not None:
        problems.append("%s.script: give command or script, not both" % where)
    _container(raw.get("container_image"), comp, where, problems)
    comp["delay"] = 0
    if raw.get("delay") not in (None, 0, "0"):
        if not allow_delay:
            problems.append("%s.delay: %r is not allowed here (%s)" % (
                where, raw["delay"], "delays count from the first component's start" if allow_delay is False
                else "alternatives of a module list start on their own"))
        else:
            try:
                comp["delay"] = parse_time(raw["delay"])
                if comp["delay"] is None:
                    raise ValueError("%r is not a finite delay" % (raw["delay"],))
            except ValueError as exc:
                problems.append("%s.delay: %s" % (where, exc))
    return comp


def container_command(image, command):
    """The srun arguments that run ``command`` inside ``image`` through the nodes' wrapper.

    Leading srun options written ``--name=value`` stay in front of the wrapper; any other leading option is
    refused (ValueError), since it cannot be told apart from the program.
    """
    options = _SRUN_OPTIONS.match(command).group(1)
    program = command[len(options):].strip()
    if not program or program.startswith("-"):
        raise ValueError("%r must start with the program (srun options before it only as --name=value)" % command)
    return "%s%s %s -- %s" % (options, CONTAINER_WRAPPER, shlex.quote(image), program)


def _container(image, comp, where, problems):
    """Check a component's container_image and route its command through the wrapper."""
    if image in (None, ""):
        return
    if not isinstance(image, str) or not _IMAGE.match(image) or ".." in image or "//" in image:
        problems.append("%s.container_image: %r is not an image name[:tag] (lower-case letters, digits, '._/-')"
                        % (where, image))
        return
    if comp["script"] is not None:
        problems.append("%s.container_image: %r applies to a command; in a script run %s %s -- PROGRAM yourself"
                        % (where, image, CONTAINER_WRAPPER, image))
        return
    comp["container_image"] = image
    if comp["command"] is not None:
        try:
            comp["command"] = container_command(image, comp["command"])
        except ValueError as exc:
            problems.append("%s.command: with container_image %s" % (where, exc))


def validate(job, system=None):
    """Check a job spec against the system's resources and return it normalised.

    ``system``: ``partitions`` (name → ``nodes``, ``max_time``, ``module``, ``cpus_per_node``, ``gres``),
    ``gateways`` (count), ``nam`` (capacity, a size), ``gce`` (bool or count). Without ``partitions`` the names are
    not checked. Raises PackJobError listing every problem, each naming the component index, field and value.
    """
    problems = []
    if not isinstance(job, dict):
        raise PackJobError(["the job must be a mapping with name and components"])
    for key in job:
        if key not in JOB_KEYS:
            problems.append("%s: unknown field (known: %s)" % (key, ", ".join(JOB_KEYS)))
    system = system or {}
    parts = _system_partitions(system)
    spec = {"name": job.get("name")}
    if not isinstance(spec["name"], str) or not _NAME.match(spec["name"]):
        problems.append("name: %r is not a job name (letters, digits, '_', '.', '+', '-'; at most 128)"
                        % (spec["name"],))
    components, alternatives = job.get("components"), job.get("module_list")
    spec["components"], spec["module_list"] = [], []
    if components and alternatives:
        problems.append("module_list: give components or module_list, not both")
    elif not components and not alternatives:
        problems.append("components: missing (give at least one component, or a module_list)")
    for field, items in (("components", components), ("module_list", alternatives)):
        if items is None:
            continue
        if not isinstance(items, list):
            problems.append("%s: %r is not a list" % (field, items))
            continue
        for i, raw in enumerate(items):
            allow = (i > 0) if field == "components" else None
            comp = _component(raw, "%s[%d]" % (field, i), parts, problems, allow)
            if comp is not None:
                comp["index"] = i
                spec[field].append(comp)
    _check_commands(spec, problems)
    spec["launch"] = job.get("launch") or "joint"
    if spec["launch"] not in LAUNCH_MODES:
        problems.append("launch: %r is not one of %s" % (spec["launch"], ", ".join(LAUNCH_MODES)))
    spec["gateways"] = _count(job.get("gateways", 0) or 0, "gateways", problems, 0) or 0
    spec["gw_file"] = spec["gw_plugin"] = None
    for key, check in (("gw_file", J.check_path), ("gw_plugin", J.check_name)):
        if job.get(key) is not None:
            try:  # the gateway prolog refuses the same values: catch them before the job is queued
                spec[key] = check(job[key], key)
            except J.JobOptionError as exc:
                problems.append(str(exc))
    spec["gw_cleanup"] = _bool(job.get("gw_cleanup"), "gw_cleanup", problems)
    for key in ("gw_file", "gw_plugin", "gw_cleanup"):
        if job.get(key) not in (None, False) and not spec["gateways"]:
            problems.append("%s: %r is set but gateways is 0" % (key, job.get(key)))
    have_gw = _count(system.get("gateways", 0) or 0, "system.gateways", problems, 0) or 0
    if spec["gateways"] and "gateways" in system and spec["gateways"] > have_gw:
        problems.append("gateways: %d asked but the system has %s" % (
            spec["gateways"], "no gateway nodes" if not have_gw else "only %d" % have_gw))
    spec["nam"] = None
    if job.get("nam") not in (None, 0, "", "0"):
        try:
            size = parse_size(job["nam"], "nam")
            spec["nam"] = {"bytes": size, "units": nam_units(size)}
            if "nam" in system:
                capacity = parse_size(system["nam"] or 0, "system.nam")
                if not capacity:
                    problems.append("nam: %r asked but the system has no NAM" % (job["nam"],))
                elif size > capacity:
                    problems.append("nam: %r asked but the NAM capacity is %r (%d %s)" % (
                        job["nam"], system["nam"], nam_units(capacity, round_up=False), NAM_LICENSE_UNIT_NAME))
        except ValueError as exc:
            problems.append(str(exc))
    spec["gce"] = _bool(job.get("gce"), "gce", problems)
    if spec["gce"] and "gce" in system and not system.get("gce"):
        problems.append("gce: true asked but the system has no GCE")
    for key in ("account", "qos"):
        spec[key] = _plain(job.get(key), key, problems)
    for key in ("chdir", "output"):
        spec[key] = _plain(job.get(key), key, problems, allow_space=True)
        if spec[key] and " " in spec[key]:
            problems.append("%s: %r holds a space, which an #SBATCH line cannot carry" % (key, spec[key]))
    env = job.get("environment") or {}
    spec["environment"] = {}
    if not isinstance(env, dict):
        problems.append("environment: %r is not a mapping of variable names to values" % (env,))
    else:
        for key, value in env.items():
            if not _ENV_NAME.match(str(key)):
                problems.append("environment.%s: %r is not a variable name" % (key, key))
            else:
                spec["environment"][str(key)] = "" if value is None else str(value)
    if problems:
        raise PackJobError(problems)
    return spec


def _check_commands(spec, problems):
    comps = spec["components"]
    if comps:
        together = [c for c in comps if not c["delay"]]
        leader = together[0] if together else None
        if leader is not None and leader["script"] is not None:
            for comp in together[1:]:
                for field in ("script", "command"):
                    if comp[field] is not None:
                        problems.append("components[%d].%s: the first component's script drives the job; run this"
                                        " component from it with srun --het-group=%d"
                                        % (comp["index"], field, together.index(comp)))
        else:
            for comp in together:
                if comp["command"] is None and comp["script"] is None:
                    problems.append("components[%d].command: missing (each component needs a command unless the"
                                    " first component has a script)" % comp["index"])
                elif comp["script"] is not None:
                    problems.append("components[%d].script: only the first component's script runs in a"
                                    " heterogeneous job; give a command" % comp["index"])
        for comp in comps:
            if comp["delay"] and comp["command"] is None and comp["script"] is None:
                problems.append("components[%d].command: missing (a delayed component runs as its own job)"
                                % comp["index"])
    for comp in spec["module_list"]:
        if comp["command"] is None and comp["script"] is None:
            problems.append("module_list[%d].command: missing (give command or script)" % comp["index"])


# --- scripts -------------------------------------------------------------------------------------------------------

def _resource_lines(comp, spec):
    lines = ["--job-name=%s" % spec["name"], "--partition=%s" % comp["partition"], "--nodes=%d" % comp["nodes"]]
    if comp["ntasks"]:
        lines.append("--ntasks=%d" % comp["ntasks"])
    if comp["cpus_per_task"]:
        lines.append("--cpus-per-task=%d" % comp["cpus_per_task"])
    if comp["time"]:
        lines.append("--time=%s" % comp["time"])
    if comp["constraint"]:
        lines.append("--constraint=%s" % comp["constraint"])
    if comp["gres"]:
        lines.append("--gres=%s" % comp["gres"])
    for key in ("account", "qos"):
        if spec[key]:
            lines.append("--%s=%s" % (key, spec[key]))
    return lines


def licenses(spec):
    """The ``--licenses`` value for the job's global resources (None when it asks for none)."""
    items = []
    if spec["gateways"]:
        items.append("%s:%d" % (LICENSE_GATEWAY, spec["gateways"]))
    if spec["nam"]:
        items.append("%s:%d" % (LICENSE_NAM, spec["nam"]["units"]))
    if spec["gce"]:
        items.append("%s:1" % LICENSE_GCE)
    return ",".join(items) or None


def _resource_fields(spec):
    fields, env = [], []
    if spec["gateways"]:
        for option in ("gateways", "gw_file", "gw_plugin", "gw_cleanup"):
            value = spec[option]
            if option == "gw_cleanup":
                value = 1 if value else None
            if value is None:
                continue
            key, var, _spank = GATEWAY_OPTIONS[option]
            fields.append((key, value))
            env.append((var, value))
    if spec["nam"]:
        fields.append((NAM_COMMENT_KEY, spec["nam"]["bytes"]))
        env.append((NAM_ENV, spec["nam"]["bytes"]))
    if spec["gce"]:
        fields.append((GCE_COMMENT_KEY, 1))
        env.append((GCE_ENV, 1))
    return fields, env


def _job_lines(spec, comment_fields):
    lines = []
    lic = licenses(spec)
    if lic:
        lines.append("--licenses=%s" % lic)
    if comment_fields:
        lines.append("--comment=%s" % format_comment(comment_fields))
    for key in ("chdir", "output"):
        if spec[key]:
            lines.append("--%s=%s" % (key, spec[key]))
    return lines


def _exports(spec, env):
    out = ["export %s=%s" % (k, shlex.quote(str(v))) for k, v in env]
    out += ["export %s=%s" % (k, shlex.quote(v)) for k, v in sorted(spec["environment"].items())]
    return out


def _body(comp):
    if comp["script"] is not None:
        lines = comp["script"].splitlines()
        if lines and lines[0].startswith("#!"):
            lines = lines[1:]
        return lines
    return ["srun %s" % comp["command"]]


def _header(title):
    return ["#!/bin/bash", "# %s" % title, "# Generated by msa.hpc.slurm_packjob."]


def _image_lines(comps):
    return ["# container_image[%d]: %s" % (c["index"], c["container_image"]) for c in comps if c["container_image"]]


def _main_script(spec):
    together = [c for c in spec["components"] if not c["delay"]]
    fields, env = _resource_fields(spec)
    het = len(together) > 1
    title = ("heterogeneous job %r with %d components" % (spec["name"], len(together)) if het
             else "job %r" % spec["name"])
    lines = _header(title) + _image_lines(together)
    for offset, comp in enumerate(together):
        if offset:
            lines.append("#SBATCH hetjob")
        opts = _resource_lines(comp, spec) + (_job_lines(spec, fields) if offset == 0 else [])
        lines += ["#SBATCH %s" % o for o in opts]
    lines += _exports(spec, env)
    leader = together[0]
    if leader["script"] is not None:
        lines += _body(leader)
    elif not het:
        lines.append("srun %s" % leader["command"])
    elif spec["launch"] == "joint":
        # One step across every component: one MPI_COMM_WORLD spanning the modules (seed 004 §4.2.1).
        lines.append("srun " + " : ".join("--het-group=%d %s" % (i, c["command"]) for i, c in enumerate(together)))
    else:
        lines.append("msa_pids=()")
        for i, comp in enumerate(together):
            lines.append("srun --het-group=%d %s &" % (i, comp["command"]))
            lines.append('msa_pids+=("$!")')
        lines += ["msa_rc=0", 'for msa_pid in "${msa_pids[@]}"; do wait "$msa_pid" || msa_rc=$?; done',
                  'exit "$msa_rc"']
    return "\n".join(lines) + "\n"


def _delayed_script(spec, comp):
    fields = [("delay", comp["delay"]), (DELAY_COMMENT_KEY, LEADER_PLACEHOLDER), ("component", comp["index"])]
    lines = _header("component %d of job %r, started %d minutes after job %s starts (delay switch, seed 004 §5.2.2)"
                    % (comp["index"], spec["name"], comp["delay"], LEADER_PLACEHOLDER)) + _image_lines([comp])
    opts = _resource_lines(comp, spec) + ["--comment=%s" % format_comment(fields)]
    for key in ("chdir", "output"):
        if spec[key]:
            opts.append("--%s=%s" % (key, spec[key]))
    lines += ["#SBATCH %s" % o for o in opts]
    lines += _exports(spec, [])
    lines += [
        "export MSA_PACK_LEADER=%s" % LEADER_PLACEHOLDER,
        "# after:<job>+<minutes> is also satisfied when the first job is cancelled: run only beside it.",
        # A heterogeneous leader lists one line per component: its first component's state decides.
        "msa_leader_state=$(squeue --noheader --jobs=%s --format=%%T 2>/dev/null | head -n 1)" % LEADER_PLACEHOLDER,
        'case "$msa_leader_state" in',
        "  RUNNING|COMPLETING|SUSPENDED) ;;",
        '  *) echo "msa: job %s is ${msa_leader_state:-gone}, not running: component %d not started" >&2; exit 3 ;;'
        % (LEADER_PLACEHOLDER, comp["index"]),
        "esac",
    ]
    lines += _body(comp)
    return "\n".join(lines) + "\n"


def _alone(spec, comp, partition=None):
    """The batch script of one job of ``comp``'s shape (in ``partition``, a partition list, when given)."""
    comp = dict(comp, delay=0, partition=partition or comp["partition"])
    return _main_script(dict(spec, components=[comp]))


# --- module lists (seed 004 §5.1.2) ---------------------------------------------------------------------------------
# Alternatives that differ only in their partition are one job with a partition list, the job record that
# ``sbatch --module-list=m1,m2`` gets from job_submit.lua: Slurm starts it in whichever partition can start it
# first, and exactly one instance exists, so nothing has to be arbitrated. Alternatives of different shapes
# (node count, time, …) cannot share one job: Slurm is asked when each would start (``sbatch --test-only``), the
# one with the lowest expected slowdown ((expected wait + requested time) / requested time) is chosen, ties to the
# shorter request (fewer node-minutes), and only that one is submitted.
SHAPE_FIELDS = ("nodes", "ntasks", "cpus_per_task", "time", "constraint", "gres", "command", "script",
                "container_image")
_TEST_ONLY = re.compile(r"Job (\d+) to start at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d) using (\d+) processors? on nodes? "
                        r"(\S+) in partition (\S+)")


def same_shape(alternatives):
    """Whether the alternatives differ in nothing but their partition (one job with a partition list serves)."""
    return all(all(c[f] == alternatives[0][f] for f in SHAPE_FIELDS) for c in alternatives[1:])


def partition_list(alternatives):
    """The partitions of the alternatives, in their order, each once (sbatch's ``--partition=a,b``)."""
    out = []
    for comp in alternatives:
        if comp["partition"] not in out:
            out.append(comp["partition"])
    return ",".join(out)


def _local_epoch(text):
    return int(time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))


def parse_test_only(text, to_epoch=_local_epoch):
    """What ``sbatch --test-only`` answered (its standard output and error, any order).

    ``{job_id, start, start_epoch, cpus, nodes, partition}`` for ``Job N to start at T using C processors on nodes X
    in partition P`` (T in the controller's local time, read with ``to_epoch``); TransportError with Slurm's own
    words when it answered that the job cannot run (``error: …``, ``Unable to allocate resources: …``) or printed
    nothing it recognises.
    """
    text = text or ""
    match = _TEST_ONLY.search(text)
    if match:
        return {"job_id": int(match.group(1)), "start": match.group(2), "start_epoch": to_epoch(match.group(2)),
                "cpus": int(match.group(3)), "nodes": match.group(4), "partition": match.group(5)}
    lines = [re.sub(r"^\s*(sbatch|srun|salloc):\s*", "", line).strip() for line in text.splitlines() if line.strip()]
    said = [line for line in lines if re.search(r"error|unable|fail|denied|invalid", line, re.I)] or lines
    raise TransportError("sbatch --test-only: %s" % ("; ".join(said)[:500] if said else "printed nothing"))


def expected_slowdown(wait_seconds, requested_minutes):
    """(expected wait + requested time) / requested time, the seed's measure (1.0: starts now)."""
    requested = 60.0 * requested_minutes
    return (max(0.0, float(wait_seconds)) + requested) / requested


def choose(alternatives, estimates, now):
    """The alternative with the lowest expected slowdown; ties to the shorter request (fewer node-minutes), then to
    the earlier one in the list.

    ``estimates``: alternative index → parse_test_only's dict, or a message (str) when Slurm said it cannot run
    there. Returns ``(index, ranking)`` where ranking has one dict per alternative, best first, with ``index``,
    ``partition``, ``start``, ``wait`` (s), ``slowdown`` and ``node_minutes``, and ``error`` for those that cannot
    run. Raises TransportError naming every alternative when none can run.
    """
    ranked, refused = [], []
    for comp in alternatives:
        est = estimates.get(comp["index"])
        minutes = comp.get("time_minutes")
        entry = {"index": comp["index"], "partition": comp["partition"], "node_minutes": None, "start": None,
                 "wait": None, "slowdown": None}
        if not minutes:
            entry["error"] = "no finite time to compare (give module_list[%d].time)" % comp["index"]
        elif not isinstance(est, dict):
            entry["error"] = str(est or "no estimate")
        else:
            wait = max(0, est["start_epoch"] - int(now))
            entry.update(start=est["start"], wait=wait, slowdown=round(expected_slowdown(wait, minutes), 6),
                         node_minutes=comp["nodes"] * minutes, partition=est["partition"])
            ranked.append(entry)
            continue
        refused.append(entry)
    if not ranked:
        raise TransportError("no alternative of the module list can run: %s" % "; ".join(
            "module_list[%d] (%s): %s" % (e["index"], e["partition"], e["error"]) for e in refused))
    ranked.sort(key=lambda e: (e["slowdown"], e["node_minutes"], e["index"]))
    return ranked[0]["index"], ranked + refused


def estimate_plan(spec, sbatch="sbatch"):
    """One ``sbatch --test-only`` per alternative of a module list whose alternatives differ in shape."""
    return [{"role": "estimate", "components": [comp["index"]], "script": _alone(spec, comp),
             "argv": [sbatch, "--test-only"]} for comp in spec["module_list"]]


def plan(spec, sbatch="sbatch", chosen=None):
    """The submissions for a validated spec, in order: ``[{role, components, script, argv}]``.

    ``role`` is ``main`` (the heterogeneous job, a plain job with one component, or the one job of a module list)
    or ``delayed`` (one job per delayed component; its script and argv hold LEADER_PLACEHOLDER until the main job
    has an id: see fill_leader). A module list is one job: with a partition list when its alternatives have the same
    shape, else the alternative ``chosen`` (an index, from choose). Scripts go to sbatch on standard input.
    """
    alternatives = spec["module_list"]
    if alternatives:
        if same_shape(alternatives):
            return [{"role": "main", "components": [c["index"] for c in alternatives],
                     "script": _alone(spec, alternatives[0], partition_list(alternatives)),
                     "argv": [sbatch, "--parsable"]}]
        comp = next((c for c in alternatives if c["index"] == chosen), None)
        if comp is None:
            raise ValueError("the alternatives differ in shape: plan needs the chosen one (not %r)" % (chosen,))
        return [{"role": "main", "components": [comp["index"]], "script": _alone(spec, comp),
                 "argv": [sbatch, "--parsable"]}]
    subs = []
    together = [c["index"] for c in spec["components"] if not c["delay"]]
    subs.append({"role": "main", "components": together, "script": _main_script(spec),
                 "argv": [sbatch, "--parsable"]})
    for comp in spec["components"]:
        if comp["delay"]:
            subs.append({"role": "delayed", "components": [comp["index"]], "delay": comp["delay"],
                         "script": _delayed_script(spec, comp),
                         "argv": [sbatch, "--parsable", "--dependency=after:%s+%d" % (LEADER_PLACEHOLDER, comp["delay"])]})
    return subs


def fill_leader(sub, leader_id):
    """A delayed submission with the main job's id in place of LEADER_PLACEHOLDER."""
    out = dict(sub)
    out["script"] = sub["script"].replace(LEADER_PLACEHOLDER, str(leader_id))
    out["argv"] = [a.replace(LEADER_PLACEHOLDER, str(leader_id)) for a in sub["argv"]]
    return out


def parse_sbatch_id(output):
    """The job id from ``sbatch --parsable`` (``1234`` or ``1234;cluster``) or from its plain message."""
    text = (output or "").strip()
    match = re.search(r"^(\d+)(?:;\S+)?$", text, re.M) or re.search(r"Submitted batch job (\d+)", text)
    if not match:
        raise TransportError("sbatch printed no job id: %r" % text[:200])
    return int(match.group(1))


# --- parsing Slurm's answers ---------------------------------------------------------------------------------------

def _number(value):
    """Slurm JSON numbers: plain, ``{"set": true, "number": n}`` (newer data_parser) or NO_VAL markers → None."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return None if number >= NO_VAL_LIMIT else number


def _state(value):
    if isinstance(value, dict):
        value = value.get("current")
    if isinstance(value, list):
        value = value[0] if value else None
    return str(value).upper().split()[0] if value else "UNKNOWN"


def _exit(value):
    """``(return code, signal)`` from a raw wait status, ``"1:0"``, or ``{"return_code", "signal"}``."""
    if value is None:
        return None, None
    if isinstance(value, dict):
        if "return_code" in value or "signal" in value:
            signal = value.get("signal")
            if isinstance(signal, dict):
                signal = _number(signal.get("id", signal.get("signal_id")))
            return _number(value.get("return_code")), _number(signal) or 0
        value = _number(value)
        if value is None:
            return None, None
    if isinstance(value, str) and ":" in value:
        code, signal = value.split(":", 1)
        return int(code), int(signal)
    status = int(value)
    return (status >> 8) & 0xFF, status & 0x7F


def _record(job_id, name, user, state, het_id, het_offset, nodes, exit_pair, partition, comment):
    nodes = "" if nodes in (None, "None assigned", "(null)") else str(nodes)
    if het_id in (0, None) or het_offset is None:
        het_id, het_offset = (het_id or None), (het_offset if het_id else None)
    code, signal = exit_pair
    return {"job_id": int(job_id), "name": name, "user": user, "state": state, "het_job_id": het_id,
            "het_job_offset": het_offset, "nodes": nodes, "exit_code": code, "signal": signal,
            "partition": partition, "comment": comment or ""}


def _load(text, what):
    try:
        data = json.loads(text) if isinstance(text, str) else text
    except ValueError as exc:
        raise TransportError("%s --json printed no JSON: %s" % (what, exc))
    errors = [e for e in (data.get("errors") or []) if e]
    if errors and not data.get("jobs"):
        raise TransportError("%s reported: %s" % (what, "; ".join(
            str(e.get("description") or e.get("error") or e) if isinstance(e, dict) else str(e) for e in errors)))
    return data.get("jobs") or []


def parse_squeue_json(text):
    """Job records from ``squeue --json`` (Slurm 22.05 layout; later layouts' wrapped numbers also read)."""
    out = []
    for job in _load(text, "squeue"):
        out.append(_record(job.get("job_id"), job.get("name"), job.get("user_name"), _state(job.get("job_state")),
                           _number(job.get("het_job_id")), _number(job.get("het_job_offset")), job.get("nodes"),
                           _exit(job.get("exit_code")), job.get("partition"), job.get("comment")))
    return out


def parse_sacct_json(text):
    """Job records from ``sacct --json`` (Slurm 22.05 layout)."""
    out = []
    for job in _load(text, "sacct"):
        het = job.get("het") or {}
        comment = job.get("comment")
        if isinstance(comment, dict):
            comment = comment.get("job")
        out.append(_record(job.get("job_id"), job.get("name"), job.get("user"), _state(job.get("state")),
                           _number(het.get("job_id")), _number(het.get("job_offset")), job.get("nodes"),
                           _exit(job.get("exit_code")), job.get("partition"), comment))
    return out


_PAIR = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_scontrol_show_job(text):
    """Job records from ``scontrol show job [-d]``: blocks of ``Key=Value`` separated by blank lines."""
    out = []
    for block in re.split(r"\n\s*\n", text or ""):
        fields = {}
        for line in block.splitlines():
            positions = [(m.start(1), m.group(1)) for m in _PAIR.finditer(line)]
            for n, (start, key) in enumerate(positions):
                end = positions[n + 1][0] if n + 1 < len(positions) else len(line)
                value = line[start + len(key) + 1:end].strip()
                fields.setdefault(key, value)   # -d adds per-node "Nodes=" lines: keep the job's own
        if "JobId" not in fields:
            continue
        user = re.sub(r"\(\d+\)$", "", fields.get("UserId", ""))
        het_id = int(fields["HetJobId"]) if fields.get("HetJobId", "").isdigit() else None
        het_offset = int(fields["HetJobOffset"]) if fields.get("HetJobOffset", "").isdigit() else None
        exit_pair = _exit(fields.get("ExitCode")) if fields.get("ExitCode") else (None, None)
        comment = fields.get("Comment")
        out.append(_record(fields["JobId"], fields.get("JobName"), user, _state(fields.get("JobState")), het_id,
                           het_offset, fields.get("NodeList"), exit_pair, fields.get("Partition"),
                           None if comment in (None, "(null)") else comment))
    return out


# --- jobs of a spec ------------------------------------------------------------------------------------------------

def _started(record):
    return record["state"] != "PENDING" and bool(record["nodes"])


def find_ids(spec, records, user):
    """The ids of the newest live instance of the job, from the queue: ``{leader, delayed, alternatives}``.

    Returns None when no job of this name and user is pending or running (so a new one may be submitted).
    """
    mine = [r for r in records if r["name"] == spec["name"] and (user is None or r["user"] == user)]
    live = [r for r in mine if r["state"] in ACTIVE_STATES]
    if not live:
        return None
    if spec["module_list"]:   # one job: the newest live one
        return {"leader": max(r["het_job_id"] or r["job_id"] for r in live), "delayed": {}, "alternatives": []}

    def leader_of(fields):
        return fields.get(DELAY_COMMENT_KEY, fields.get(LEGACY_DELAY_KEY))

    leaders = set()
    for r in live:
        fields = parse_comment(r["comment"])
        if (leader_of(fields) or "").isdigit():
            leaders.add(int(leader_of(fields)))
        else:
            leaders.add(r["het_job_id"] or r["job_id"])
    leader = max(leaders)
    delayed = {}
    for r in mine:
        fields = parse_comment(r["comment"])
        if leader_of(fields) == str(leader) and fields.get("component", "").isdigit():
            delayed[int(fields["component"])] = r["job_id"]
    return {"leader": leader, "delayed": delayed, "alternatives": []}


def cancel_targets(spec, records, user):
    """Job ids to scancel for state=absent: every live job of this name and user (hetjobs by their leader)."""
    ids = set()
    for r in records:
        if r["name"] == spec["name"] and (user is None or r["user"] == user) and r["state"] in ACTIVE_STATES:
            ids.add(r["het_job_id"] or r["job_id"])
    return sorted(ids)


def _component_result(index, record, role, extra=None):
    result = {"index": index, "role": role, "job_id": None, "het_job_offset": None, "state": "UNKNOWN",
              "nodes": "", "node_list": [], "exit_code": None, "signal": None, "partition": None}
    if record:
        try:
            node_list = expand(record["nodes"])
        except HostlistError:
            node_list = [record["nodes"]]
        result.update(job_id=record["job_id"], het_job_offset=record["het_job_offset"], state=record["state"],
                      nodes=record["nodes"], node_list=node_list, exit_code=record["exit_code"],
                      signal=record["signal"], partition=record["partition"])
    result.update(extra or {})
    return result


def results(spec, ids, records):
    """Per-component results for a job whose ids are known, from any mix of squeue/sacct/scontrol records.

    Returns ``{job_id, state, finished, failed, components, winner}``; ``state`` is the job's overall state
    (the first non-final state of a component, else FAILED/… when one failed, else COMPLETED).
    """
    by_id = {}
    for r in records:
        by_id.setdefault(r["job_id"], r)
    comps = []
    winner = None
    if spec["module_list"]:
        # one job: pending with a partition list (same shape), or in the partition it was submitted to or runs in
        record = by_id.get(ids["leader"])
        where = (record or {}).get("partition") or ""
        if record is not None and "," not in where:
            winner = next((c["index"] for c in spec["module_list"] if c["partition"] == where), None)
        for comp in spec["module_list"]:
            chosen = winner == comp["index"]
            if chosen or winner is None:
                entry = _component_result(comp["index"], record, "alternative", {"chosen": chosen})
                entry["job_id"] = ids["leader"]
            else:
                entry = _component_result(comp["index"], None, "alternative", {"chosen": False})
                entry["state"] = NOT_CHOSEN
            comps.append(entry)
        relevant = [c for c in comps if c["chosen"]] or comps[:1]
        live = [c for c in relevant if c["state"] not in FINAL_STATES]
        job_id = ids["leader"]
    else:
        leader = ids["leader"]
        het = sorted((r for r in records if r["het_job_id"] == leader), key=lambda r: r["het_job_offset"] or 0)
        together = [c for c in spec["components"] if not c["delay"]]
        for offset, comp in enumerate(together):
            record = het[offset] if offset < len(het) else (by_id.get(leader) if offset == 0 else None)
            comps.append(_component_result(comp["index"], record, "main"))
        for comp in spec["components"]:
            if comp["delay"]:
                job_id = ids["delayed"].get(comp["index"])
                entry = _component_result(comp["index"], by_id.get(job_id), "delayed", {"delay": comp["delay"]})
                entry["job_id"] = job_id
                comps.append(entry)
        comps.sort(key=lambda c: c["index"])
        relevant = comps
        live = [c for c in comps if c["state"] not in FINAL_STATES]
        job_id = leader
    finished = not live
    failed = [c for c in relevant if c["state"] in FINAL_STATES and (c["state"] != "COMPLETED" or c["exit_code"])]
    if live:
        state = live[0]["state"]
    elif failed:
        state = failed[0]["state"] if failed[0]["state"] != "COMPLETED" else "FAILED"
    else:
        state = "COMPLETED" if any(c["state"] == "COMPLETED" for c in relevant) else (
            relevant[0]["state"] if relevant else "UNKNOWN")
    return {"job_id": job_id, "state": state, "finished": finished, "failed": [c["index"] for c in failed],
            "components": comps, "winner": winner}


def all_ids(ids):
    """Every job id of an instance (leader, delayed parts, alternatives)."""
    out = [ids["leader"]] if ids.get("leader") else []
    return out + sorted(ids.get("delayed", {}).values()) + list(ids.get("alternatives", []))


# --- transport -----------------------------------------------------------------------------------------------------

class CliTransport:
    """Slurm through its commands (sbatch, squeue, sacct, scontrol, scancel).

    ``run_command(argv, data=None)`` returns ``(rc, stdout, stderr)`` (AnsibleModule.run_command fits). A REST
    transport (slurmrestd) offers the same four methods: submit, jobs, history, cancel; only this one can
    ``estimate`` (slurmrestd v0.0.38 has no test-only submission).
    """

    def __init__(self, run_command, commands=None):
        self._run_command = run_command
        self.commands = {"sbatch": "sbatch", "squeue": "squeue", "sacct": "sacct", "scontrol": "scontrol",
                         "scancel": "scancel"}
        self.commands.update(commands or {})

    def _run(self, argv, data=None):
        rc, out, err = self._run_command(argv, data=data) if data is not None else self._run_command(argv)
        if rc != 0:
            raise TransportError("%s failed (exit %s): %s" % (" ".join(argv[:2]), rc, (err or out or "").strip()[:500]))
        return out

    def submit(self, argv, script):
        """Run one planned sbatch (argv from plan) with the script on standard input; return the job id."""
        argv = [self.commands["sbatch"]] + list(argv[1:])
        return parse_sbatch_id(self._run(argv, data=script))

    def estimate(self, argv, script):
        """Ask ``sbatch --test-only`` (argv from estimate_plan) when and where the job would start; parse_test_only's
        dict, or TransportError with Slurm's reason when it cannot run."""
        argv = [self.commands["sbatch"]] + list(argv[1:])
        rc, out, err = self._run_command(argv, data=script)
        text = "%s\n%s" % (err or "", out or "")
        if rc != 0:
            parse_test_only("\n".join(line for line in text.splitlines() if "to start at" not in line))
        return parse_test_only(text)

    def jobs(self, user=None):
        """Every job slurmctld still holds (pending, running and recently finished), as records."""
        argv = [self.commands["squeue"], "--json", "--all", "--states=all"]
        if user:
            argv.append("--user=%s" % user)
        return parse_squeue_json(self._run(argv))

    def history(self, job_ids):
        """Records of finished jobs from accounting (sacct); needs slurmdbd."""
        if not job_ids:
            return []
        return parse_sacct_json(self._run([self.commands["sacct"], "--json", "--jobs=%s"
                                           % ",".join(str(i) for i in job_ids)]))

    def cancel(self, job_ids):
        if job_ids:
            self._run([self.commands["scancel"]] + [str(i) for i in job_ids])
