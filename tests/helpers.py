# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared by the bundle's tests and the molecule testinfra suite: read the layered inventory as plain data."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BUNDLE = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def plain(value):
    """ansible-inventory marks some values unsafe as {"__ansible_unsafe": v}: unwrap them."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def ansible_inventory(*args):
    """``ansible-inventory <args>`` with the bundle's ansible.cfg, as plain data."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    out = subprocess.run([str(BIN / "ansible-inventory")] + [str(a) for a in args], check=True,
                         capture_output=True, text=True, env=env, cwd=BUNDLE).stdout
    return plain(json.loads(out))


def render(expression, system, site="inventories/sites/example"):
    """Evaluate a Jinja expression on localhost with the common, `system` and `site` layers (paths from the bundle)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(BUNDLE / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    run = subprocess.run([str(BIN / "ansible"), "localhost", "-m", "ansible.builtin.debug", "-a",
                          json.dumps({"msg": "{{ %s }}" % expression}), "-i", "common.yml",
                          "-i", "inventories/systems/" + system, "-i", str(site)],
                         capture_output=True, text=True, env=env, cwd=BUNDLE, check=True)
    report = json.JSONDecoder().raw_decode(run.stdout[run.stdout.index("{"):])[0]   # warnings may follow it
    return report["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]


SLURM_FIXTURES = BUNDLE / "collections/ansible_collections/msa/hpc/tests/unit/plugins/module_utils/fixtures/slurm"


def squeue_json(*components, **common):
    """``squeue --json`` output of Slurm 22.05 with a (heterogeneous) job among others: the captured record of a
    real running hetjob with the given fields replaced (``job_id``, ``user_name``, ``user_id``, ``group_id``,
    ``comment``, ``licenses``, ``partition``, ``nodes``, ``current_working_directory``; hetjob fields filled in),
    after the captured records of three other jobs (as 22.05's squeue --json lists every job whatever -j says)."""
    real = json.loads((SLURM_FIXTURES / "squeue_json_22.05_all_states.json").read_text())
    template = next(j for j in real["jobs"] if j["job_state"] == "RUNNING")
    others = [j for j in real["jobs"] if j["het_job_id"] != template["het_job_id"]]
    leader = int(components[0].get("job_id", common.get("job_id", 100)))
    jobs = []
    for offset, comp in enumerate(components):
        job = dict(template, **common)
        job.update(comp)
        job["job_id"] = int(comp.get("job_id", leader + offset))
        if len(components) > 1:
            job.update(het_job_id=leader, het_job_offset=offset)
        else:
            job.update(het_job_id=0, het_job_offset=0)
        jobs.append(job)
    return json.dumps(dict(real, jobs=others + jobs))


def interfaces_up(*addresses, down=()):
    """A psgw agent's view of the kernel (``ip -json addr show``): each address on an interface of its own, its link
    up unless the address is in ``down``; for Agent(..., interfaces=...)."""
    def read():
        return [{"ifname": "if%d" % n, "flags": ["UP"] + ([] if a in down else ["LOWER_UP"]),
                 "operstate": "DOWN" if a in down else "UP", "addr_info": [{"family": "inet", "local": a}]}
                for n, a in enumerate(addresses)]
    return read


class FakeNft:
    """``nft`` as the Forwarder runs it: keeps the table's counters, records every script, can be told to fail."""

    def __init__(self):
        self.counters = None  # None: no table yet
        self.scripts = []
        self.fail = None

    def __call__(self, args, script=None):
        from msa_sim.psgwd.forward import ForwardError  # pylint: disable=import-outside-toplevel

        if self.fail:
            raise ForwardError("nft %s failed: %s" % (" ".join(args), self.fail))
        if args[:3] == ["-j", "list", "counters"]:
            if self.counters is None:
                raise ForwardError("nft -j list counters failed: Error: No such file or directory")
            return json.dumps({"nftables": [{"metainfo": {"json_schema_version": 1}}] + [
                {"counter": {"family": "inet", "name": n, "table": "msa_gw", "handle": 1, **c}}
                for n, c in self.counters.items()]})
        assert args == ["-f", "-"]
        self.scripts.append(script)
        self.counters = dict(self.counters or {})
        for line in script.splitlines():
            words = line.split()
            if words[:2] == ["add", "counter"]:
                self.counters.setdefault(words[4], {"packets": 0, "bytes": 0})
            elif words[:2] == ["delete", "counter"]:
                del self.counters[words[4]]
        return ""

    def rules(self):
        return [line for line in self.scripts[-1].splitlines() if line.startswith("add rule")]


# scontrol stand-in: reservations live in <dir>/res.json ({name: "lic:n,..."}), `show licenses` prints the licences
# given, every call is logged to <dir>/scontrol.log
SCONTROL = r'''#!%(python)s
import json, os, sys
state, log, licenses = %(state)r, %(log)r, %(licenses)r
args = sys.argv[1:]
with open(log, "a") as fh:
    fh.write(" ".join(args) + "\n")
res = json.load(open(state)) if os.path.exists(state) else {}
if args[:3] == ["-o", "show", "reservation"]:
    if args[3] not in res:
        print("Reservation %%s not found" %% args[3])
        sys.exit(1)
    print("ReservationName=%%s StartTime=now EndTime=Unknown Flags=ANY_NODES Users=root Licenses=%%s State=ACTIVE"
          %% (args[3], res[args[3]]))
elif args[:3] == ["-o", "show", "licenses"]:
    for name, total in licenses.items():
        print("LicenseName=%%s Total=%%d Used=0 Free=%%d Reserved=0 Remote=no" %% (name, total, total))
elif args[0] == "update":   # a job marked refused (slurm/jobs.refuse_start): the log is what tests read
    pass
else:
    opts = dict(a.split("=", 1) for a in args[1:])
    name = opts["reservation"]
    if args[0] == "delete":
        del res[name]
    else:
        res[name] = opts["licenses"]
    json.dump(res, open(state, "w"))
'''


def fake_scontrol(directory, licenses=None):
    """An executable scontrol stand-in in ``directory`` (see SCONTROL); ``licenses`` is {name: total}."""
    path = Path(directory) / "scontrol"
    path.write_text(SCONTROL % {"python": sys.executable, "state": str(Path(directory) / "res.json"),
                                "log": str(Path(directory) / "scontrol.log"), "licenses": dict(licenses or {})})
    path.chmod(0o755)
    return path
