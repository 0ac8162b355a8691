# SPDX-License-Identifier: GPL-3.0-or-later
"""The MSA options of sbatch/salloc/srun: the SPANK plugin's syntax check (msa_opts.c, built here into its test
binary with the host's gcc) and job_submit.lua's checks and translation (run by Debian's lua5.1, the Lua of
Debian's job_submit_lua.so). The comment job_submit.lua writes must decode with module_utils/_jobopts.py to what
the options asked: one codec, read by the hooks."""
from __future__ import annotations

import subprocess

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _jobopts as J
from helpers import BUNDLE

ROLES = BUNDLE / "collections/ansible_collections/msa/hpc/roles"
SPANK = ROLES / "slurm/files/spank"
LUA_MODULE = ROLES / "slurmctld/files/job_submit.lua"
DRIVER = BUNDLE / "tests/lua/run_job_submit.lua"
NO_VAL = 4294967294

CONF = ('{gateways = 2, gateway_license = "gateway", nam_gib = 7, nam_license = "nam", gce_communicators = 256, '
        'gce_license = "gce", default_partition = "cm", modules = {cm = "cm", esb = "esb", dam = "dam"}, '
        'extoll_partitions = {esb = true, dam = true}, extoll_list = "dam, esb"}')


@pytest.fixture(scope="module")
def opts_binary(tmp_path_factory):
    out = tmp_path_factory.mktemp("spank") / "test_msa_opts"
    subprocess.run(["gcc", "-Wall", "-Wextra", "-Werror", "-O2", "-o", str(out), str(SPANK / "msa_opts.c"),
                    str(SPANK / "test_msa_opts.c")], check=True)
    return out


def check(binary, *args):
    proc = subprocess.run([str(binary)] + list(args), capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout.strip()


@pytest.mark.parametrize("name,value,carried", [
    ("gw_num", "2", "2"), ("gw_num", "4096", "4096"), ("gw_file", "route.txt", "route.txt"),
    ("gw_file", "/home/u/r", "/home/u/r"), ("gw_plugin", "balance", "balance"), ("gw_cleanup", None, "1"),
    ("gw_env", "PSP_DEBUG=1,X=a:b", "PSP_DEBUG=1,X=a:b"), ("delay", "0", "0"), ("delay", "55", "55"),
    ("module-list", "cm,esb", "cm,esb"), ("network-attached-memory", "1G", "1G"),
    ("network-attached-memory", "512MiB:nonvolatile", "512MiB:nonvolatile"),
    ("global-collective-engine", None, "enabled"), ("global-collective-engine", "disabled", "disabled"),
    # what an srun inside an `sbatch --global-collective-engine` job reads back from the job's environment
    ("global-collective-engine", "(null)", "enabled"),
])
def test_spank_accepts(opts_binary, name, value, carried):
    rc, out = check(opts_binary, name, *([value] if value is not None else []))
    assert (rc, out) == (0, "ok " + carried)


@pytest.mark.parametrize("name,value", [
    ("gw_num", "0"), ("gw_num", "-1"), ("gw_num", "2x"), ("gw_num", "4097"), ("gw_num", ""),
    ("gw_file", "../x"), ("gw_file", "a/../b"), ("gw_file", "~/r"), ("gw_file", "a b"), ("gw_file", "d/"),
    ("gw_plugin", "mod:fn"), ("gw_plugin", "../p"), ("gw_env", "1A=2"), ("gw_env", "NOEQ"),
    ("delay", "-1"), ("delay", "1.5"), ("delay", "1m"), ("delay", ""),
    ("module-list", "cm,,esb"), ("module-list", "cm,cm"), ("module-list", "CM"), ("module-list", ",cm"),
    ("network-attached-memory", "0G"), ("network-attached-memory", "-1G"), ("network-attached-memory", "1X"),
    ("network-attached-memory", "1G:fast"), ("network-attached-memory", "iG"),
    ("global-collective-engine", "on"),
])
def test_spank_refuses_naming_option_and_value(opts_binary, name, value):
    rc, out = check(opts_binary, name, value)
    assert rc == 1
    assert out.startswith("--%s=%s: " % (name, value)), out


def test_spank_help_lines(opts_binary):
    rc, out = check(opts_binary, "--list")
    names = [line.split("\t")[0].split("=")[0] for line in out.splitlines()]
    assert rc == 0
    assert names == ["--gw_num", "--gw_file", "--gw_plugin", "--gw_cleanup", "--gw_env", "--delay", "--module-list",
                     "--network-attached-memory", "--global-collective-engine"]
    # one line each in --help: Slurm wraps a usage text longer than 48 characters
    assert all(len(line.split("\t")[1]) <= 48 for line in out.splitlines()), out


def lua_string(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def translate(env, **job):
    """job_submit.lua on a request with these SPANK_MSA_* variables and job_desc fields."""
    fields = ["spank_job_env = {%s}" % ", ".join(
        "[%d] = %s" % (i, lua_string("SPANK_MSA_%s=%s" % (k, v))) for i, (k, v) in enumerate(env.items()))]
    for key, value in job.items():
        fields.append("%s = %s" % (key, value if isinstance(value, int) else lua_string(value)))
    case = "{conf = %s, now = 1000, job = {%s}}" % (CONF, ", ".join(fields))
    proc = subprocess.run(["lua5.1", str(DRIVER), str(LUA_MODULE), case], capture_output=True, text=True,
                          check=True)
    return dict(line.split("=", 1) for line in proc.stdout.splitlines())


def test_lua_leaves_a_job_without_options_alone():
    assert translate({}, partition="cm") == {"rc": "untouched", "partition": "cm"}


def test_lua_gateways_licence_and_comment_decode_with_the_hooks_codec():
    out = translate({"GW_NUM": "2", "GW_FILE": "route.txt", "GW_PLUGIN": "balance", "GW_CLEANUP": "1"},
                    partition="cm", het_job_offset=0)
    assert out["rc"] == "translated" and out["licenses"] == "gateway:2"
    assert J.decode(out["comment"]) == {"gw_num": 2, "gw_file": "route.txt", "gw_plugin": "balance",
                                        "gw_cleanup": True}
    assert J.decode(out["comment"], J.GATEWAY_KEYS) == J.decode(J.encode(J.decode(out["comment"])), J.GATEWAY_KEYS)


def test_lua_writes_exactly_what_jobopts_encode_writes():
    out = translate({"GW_NUM": "1", "NAM": "2G:nonvolatile", "GCE": "enabled"}, partition="esb")
    assert out["comment"] == J.encode({"gw_num": 1, "nam": 2 << 30, "nam_nonvolatile": True, "gce": True})
    assert out["licenses"] == "gateway:1,nam:2,gce:1"


def test_lua_nam_rounds_licences_up_and_keeps_user_licences():
    out = translate({"NAM": "1536M"}, partition="dam", licenses="foo:1")
    assert out["licenses"] == "foo:1,nam:2"
    assert J.decode(out["comment"]) == {"nam": 1536 << 20}


def test_lua_later_hetjob_component_gets_no_second_share():
    out = translate({"GW_NUM": "2"}, partition="esb", het_job_offset=1)
    assert out == {"rc": "translated", "partition": "esb"}


def test_lua_module_list_becomes_slurms_partition_list():
    out = translate({"MODULE_LIST": "cm,esb"})
    assert out["partition"] == "cm,esb"


def test_lua_delay_sets_the_begin_time():
    out = translate({"DELAY": "2"}, partition="dam")
    assert out["begin_time"] == "1120" and J.decode(out["comment"]) == {"delay": "2"}


def test_lua_delay_after_another_job_uses_slurms_after_plus_minutes():
    out = translate({"DELAY": "1"}, partition="dam", dependency="after:41")
    assert out["dependency"] == "after:41+1" and "begin_time" not in out
    # the controller's delay hook finds the delayed part of job 41 by this comment (and checks the dependency)
    assert J.decode_delay(out["comment"]) == {"delay": 1, "delay_after": "41"}


def test_lua_delay_zero_after_another_job_is_slurms_plain_after():
    out = translate({"DELAY": "0"}, partition="dam", dependency="after:41")
    assert out["dependency"] == "after:41" and J.decode_delay(out["comment"]) == {"delay": 0, "delay_after": "41"}


def test_lua_delay_after_another_job_takes_the_default_partition():
    out = translate({"DELAY": "1"}, dependency="after:41")
    assert out["rc"] == "translated" and J.decode_delay(out["comment"])["delay_after"] == "41"


def test_lua_refuses_a_hand_written_delay_after_beside_the_option():
    out = translate({"DELAY": "1"}, partition="dam", dependency="after:41", comment="msa:delay_after=7")
    assert out == {"rc": "refused", "msg": "--comment=msa:delay_after=7: delay_after is also given as an option"}


@pytest.mark.parametrize("env,job,message", [
    ({"DELAY": "1"}, {"partition": "dam", "dependency": "afterok:41"},
     "--delay=1: combines only with --dependency=after:<job> (not afterok:41)"),
    ({"DELAY": "1"}, {"partition": "cm,dam", "dependency": "after:41"},
     "--delay=1: its nodes are reserved in one partition (not cm,dam)"),
    ({"DELAY": "1", "MODULE_LIST": "cm,esb"}, {"dependency": "after:41"},
     "--delay=1: its nodes are reserved in one partition (not cm,esb)"),
    ({"GW_NUM": "3"}, {"partition": "cm"}, "--gw_num=3: the gateway pool has 2 gateways"),
    ({"GW_NUM": "x"}, {"partition": "cm"}, "--gw_num=x: not a whole number from 1 to 4096"),
    ({"MODULE_LIST": "cm,gpu"}, {}, "--module-list=cm,gpu: no module gpu (modules: cm, dam, esb)"),
    ({"MODULE_LIST": "cm"}, {"partition": "esb"}, "--module-list=cm: give either --module-list or --partition"),
    ({"DELAY": "-1"}, {"partition": "dam"}, "--delay=-1: not a whole number from 0 to 525600"),
    ({"DELAY": "1.5"}, {"partition": "dam"}, "--delay=1.5: not a whole number"),
    ({"NAM": "8G"}, {"partition": "esb"}, "--network-attached-memory=8G: the NAM offers 7 GiB"),
    ({"NAM": "1G"}, {"partition": "cm"},
     "--network-attached-memory=1G: partition cm is not on the EXTOLL fabric (NAM and GCE: dam, esb)"),
    ({"NAM": "1G"}, {}, "--network-attached-memory=1G: partition cm is not on the EXTOLL fabric"),
    ({"GCE": "enabled"}, {"partition": "esb,cm"}, "--global-collective-engine=enabled: partition cm is not on"),
    ({"NAM": "1G:fast"}, {"partition": "esb"}, "--network-attached-memory=1G:fast: the flag after ':'"),
    ({"GW_FILE": "r"}, {"partition": "cm"}, "--gw_file=r: needs --gw_num"),
    ({"GW_NUM": "1", "GW_FILE": "../r"}, {"partition": "cm"}, "--gw_file=../r: not a usable file name"),
    ({"GW_NUM": "1"}, {"partition": "cm", "comment": "hello"}, "--comment=hello: the comment carries"),
    ({"GW_NUM": "1"}, {"partition": "cm", "comment": "msa:gw_num=2"}, "gw_num is also given as an option"),
    ({"GW_NUM": "1"}, {"partition": "cm", "licenses": "gateway:2"}, "--licenses=gateway:2: gateway is asked"),
])
def test_lua_refuses_naming_option_and_value(env, job, message):
    out = translate(env, **job)
    assert out["rc"] == "refused" and message in out["msg"], out
