# SPDX-License-Identifier: GPL-3.0-or-later
"""The job model of slurm_packjob: a job spec validated against the system and normalised, and its comment codec."""
from __future__ import annotations

import re
import shlex

from ansible_collections.msa.hpc.plugins.module_utils import _jobopts as J
from ansible_collections.msa.hpc.plugins.module_utils._slurm_conf import (
    NAM_LICENSE_UNIT_NAME, format_time, nam_units, parse_gres, parse_size, parse_time)

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
# --delay, so the controller's delay hook (msa-delay-hook, module delay_hooks) reserves their nodes alike
DELAY_COMMENT_KEY = "delay_after"
LEGACY_DELAY_KEY = "delay_of"    # what slurm_packjob wrote before (jobs still queued across an upgrade)
LEADER_PLACEHOLDER = "%LEADER_JOB_ID%"   # in delayed scripts/argv until the first job has an id

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
