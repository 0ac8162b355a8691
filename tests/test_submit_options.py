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


def translate(env, conf=CONF, modify=None, **job):
    """job_submit.lua on a request with these SPANK_MSA_* variables and job_desc fields (with ``modify``: a change
    of queued job ``modify``)."""
    fields = ["spank_job_env = {%s}" % ", ".join(
        "[%d] = %s" % (i, lua_string("SPANK_MSA_%s=%s" % (k, v))) for i, (k, v) in enumerate(env.items()))]
    for key, value in job.items():
        fields.append("%s = %s" % (key, value if isinstance(value, int) else lua_string(value)))
    case = "{conf = %s, now = 1000, job = {%s}%s}" % (conf, ", ".join(fields),
                                                      ", modify = %d" % modify if modify else "")
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
    assert out == {"rc": "refused", "msg": "--comment=msa:delay_after=7: delay is also given as an option"}


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


# --- keys written by hand in the comment (seed 004 §4.2) take the options' checks and are written again -----------

def passwd_conf(tmp_path, home="/home/u", uid=5103):
    """CONF with a passwd file in which ``uid`` has ``home``."""
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\nu:x:%d:%d::%s:/bin/bash\n" % (uid, uid, home))
    return CONF[:-1] + ", passwd = %s}" % lua_string(str(passwd))


def test_lua_hand_written_seed_form_becomes_the_options_and_their_licences():
    out = translate({}, partition="esb", comment="gw_num=2,gw_file=route.txt,gw_cleanup nam=1G,nam_nonvolatile")
    assert out["rc"] == "translated" and out["licenses"] == "gateway:2,nam:1"
    assert out["comment"] == J.encode({"gw_num": 2, "gw_file": "route.txt", "gw_cleanup": True, "nam": 1 << 30,
                                       "nam_nonvolatile": True})


def test_lua_packjobs_msa_comment_keeps_the_licences_it_asks():
    # msa.hpc.slurm_packjob writes the msa: comment and --licenses itself: the same request, written again
    comment = J.encode({"gw_num": 1, "nam": 1 << 30, "gce": True})
    out = translate({}, partition="esb", comment=comment, licenses="gateway:1,nam:1,gce:1")
    assert out == {"rc": "translated", "partition": "esb", "licenses": "gateway:1,nam:1,gce:1", "comment": comment}


def test_lua_a_free_comment_without_keys_is_left_alone():
    assert translate({}, partition="cm", comment="sweep 3 of 10")["rc"] == "untouched"
    # a bare gce or nam is a word of the comment, not an option (as module_utils/_jobopts reads it)
    assert translate({}, partition="esb", comment="gce test")["rc"] == "untouched"


def test_lua_hand_written_nam_device_is_carried_in_the_hooks_order():
    out = translate({}, partition="esb", comment="msa:gce=1;nam_device=nam0;nam_bytes=1073741824")
    assert J.decode(out["comment"]) == {"nam": 1 << 30, "nam_device": "nam0", "gce": True}
    assert out["comment"] == "msa:nam_bytes=1073741824;nam_device=nam0;gce=1"


@pytest.mark.parametrize("comment,message", [
    # the same checks as the options
    ("gw_num=9", "--gw_num=9: the gateway pool has 2 gateways"),
    ("gw_num=1,gw_plugin=os:system", "--gw_plugin=os:system: not a bare name"),
    ("gw_num=1,gw_file=../victim/r", "--gw_file=../victim/r: not a usable file name"),
    ("gw_file=r", "--gw_file=r: needs --gw_num"),
    ("nam=9G", "--network-attached-memory=9G: the NAM offers 7 GiB"),
    ("msa:nam_bytes=-1", "--network-attached-memory=-1: not a size"),
    ("gce=maybe", "--gce=maybe: not a boolean"),
    ("nam=1G,nam_device=../d", "--nam_device=../d: not a bare name"),
    # a key it does not know, named
    ("msa:gw_num=1;gw_nums=2", "--comment=msa:gw_num=1;gw_nums=2: gw_nums is not a key msa.hpc knows"),
    ("gw_numb=2", "gw_numb is not a key msa.hpc knows"),
    ("msa:x", "--comment=msa:x: \"x\" is not key=value"),
    ("msa:gce", "--comment=msa:gce: \"gce\" is not key=value"),
    # what only the controller names
    ("nam=1G,nam_name=slurm-41", "nam_name: the NAM allocation is named after the job (slurm-<job id>)"),
    ("msa:delay=1;delay_after=41", "--delay_after=41: needs --dependency=after:41+1 (not none)"),
    ("msa:delay_after=41", "delay and delay_after go together"),
    ("msa:component=2", "delay and delay_after go together"),
    ("delay=1,delay_after=41", "delay is not a key msa.hpc knows"),   # the delay keys only in the msa: form
    # keys the hooks' reader would find but the form hides, and words beside keys that re-encoding would lose
    ("run:gw_num=2", "\"run:gw_num=2\" hides the key gw_num"),
    ("gw_num=1 please", "a comment with MSA keys holds only them (not \"please\")"),
    ("gw_num=1,gw_num=2", "gw_num is given twice"),
])
def test_lua_refuses_hand_written_keys_naming_key_and_value(comment, message):
    out = translate({}, partition="esb", comment=comment)
    assert out["rc"] == "refused" and message in out["msg"], out


def test_lua_hand_written_key_beside_its_option_is_refused():
    out = translate({"NAM": "1G"}, partition="esb", comment="nam_nonvolatile")
    assert out == {"rc": "refused", "msg": "--comment=nam_nonvolatile: nam_nonvolatile is also given as an option"}


# --- --gw_file inside the user's files, as the prolog's rule (module_utils/node/userfile.py) -----------------------

@pytest.mark.parametrize("gw_file", ["route.txt", "sub/route.txt", "/home/u/r", "/work/j/r", "/home/u/./x/r"])
def test_lua_gw_file_in_home_or_workdir_is_accepted(tmp_path, gw_file):
    out = translate({"GW_NUM": "1", "GW_FILE": gw_file}, conf=passwd_conf(tmp_path), partition="cm",
                    work_dir="/work/j", user_id=5103)
    assert out["rc"] == "translated" and J.decode(out["comment"])["gw_file"] == gw_file


@pytest.mark.parametrize("gw_file", ["/etc/msa-sec-owned", "/home/victim/r", "/home/u", "/home/user2/r", "/r",
                                     "/work/jx/r"])
def test_lua_gw_file_outside_the_users_files_is_refused_at_submission(tmp_path, gw_file):
    out = translate({"GW_NUM": "1"}, conf=passwd_conf(tmp_path), partition="cm", work_dir="/work/j",
                    user_id=5103, comment="gw_file=" + gw_file)
    assert out["rc"] == "refused"
    assert out["msg"].startswith("--gw_file=%s: outside the job user's home and the job's working directory "
                                 "(/home/u, /work/j)" % gw_file), out


def test_lua_gw_file_of_an_account_the_controller_does_not_know_lies_in_the_working_directory(tmp_path):
    # as the prolog (userfile.job_record): no home for an account the controller cannot look up
    out = translate({"GW_NUM": "1", "GW_FILE": "/home/v/r"}, conf=passwd_conf(tmp_path), partition="cm",
                    work_dir="/work/j", user_id=7777)
    assert out == {"rc": "refused", "msg": "--gw_file=/home/v/r: outside the job user's home and the job's working "
                                           "directory (/work/j)"}
    out = translate({"GW_NUM": "1", "GW_FILE": "/work/j/r"}, conf=passwd_conf(tmp_path), partition="cm",
                    work_dir="/work/j", user_id=7777)
    assert out["rc"] == "translated"


# --- delay reservations admit only their job ------------------------------------------------------------------------

@pytest.mark.parametrize("reservation", ["msa_delay_41", "other,msa_delay_41", "MSA_DELAY_41"])
def test_lua_refuses_a_new_job_in_a_delay_reservation(reservation):
    out = translate({}, partition="cm", reservation=reservation)
    assert out["rc"] == "refused" and "is the delay switch's reservation of job 41 only" in out["msg"], out


def test_lua_refuses_moving_another_job_into_a_delay_reservation():
    out = translate({}, modify=42, reservation="msa_delay_41")
    assert out == {"rc": "refused", "msg": "--reservation=msa_delay_41: msa_delay_41 is the delay switch's "
                                           "reservation of job 41 only"}


def test_lua_lets_the_delay_hook_bind_a_job_to_its_own_reservation():
    assert translate({}, modify=41, reservation="msa_delay_41")["rc"] == "translated"
    assert translate({}, partition="cm", reservation="maint")["rc"] == "untouched"


def test_lua_refuses_msa_keys_in_a_comment_changed_after_submission():
    out = translate({}, modify=41, comment="gw_num=2")
    assert out == {"rc": "refused", "msg": "--comment=gw_num=2: gw_num: MSA options are given at submission, "
                                           "not changed later"}
    assert translate({}, modify=41, comment="just a note")["rc"] == "translated"


@pytest.mark.parametrize("comment,licenses,message", [
    ("gw_num=2", "gateway:1", "--licenses=gateway:1: the comment asks gateway:2, more than the job's gateway:1"),
    ("nam=2G", "nam:1", "--licenses=nam:1: the comment asks nam:2, more than the job's nam:1"),
])
def test_lua_refuses_a_comment_asking_more_than_the_jobs_own_licences(comment, licenses, message):
    out = translate({}, partition="esb", comment=comment, licenses=licenses)
    assert out == {"rc": "refused", "msg": message}


def test_lua_packjobs_delayed_component_keeps_its_delay_keys_beside_their_dependency():
    # msa.hpc.slurm_packjob: sbatch --dependency=after:<leader>+M --comment=msa:delay=M;delay_after=<leader>;component=I
    out = translate({}, partition="dam", dependency="after:41+2", comment="msa:delay=2;delay_after=41;component=1")
    assert out["rc"] == "translated" and out["dependency"] == "after:41+2"
    assert out["comment"] == "msa:delay=2;delay_after=41;component=1"
    assert J.decode_delay(out["comment"]) == {"delay": 2, "delay_after": "41"}


@pytest.mark.parametrize("dependency,partition,message", [
    ("after:42+2", "dam", "--delay_after=41: needs --dependency=after:41+2 (not after:42+2)"),
    ("after:41", "dam", "--delay_after=41: needs --dependency=after:41+2 (not after:41)"),
    ("after:41+2", "cm,dam", "--delay=2: its nodes are reserved in one partition (not cm,dam)"),
])
def test_lua_refuses_delay_keys_the_dependency_does_not_back(dependency, partition, message):
    out = translate({}, partition=partition, dependency=dependency, comment="msa:delay=2;delay_after=41")
    assert out == {"rc": "refused", "msg": message}


def test_lua_accepts_what_slurm_packjob_submits_and_keeps_its_comment():
    """slurm_packjob writes --licenses and the msa: comment itself (and, for a delayed component, the delay keys beside
    --dependency=after:<leader>+M): job_submit.lua must read them as they are, with no second licence."""
    from ansible_collections.msa.hpc.plugins.module_utils.slurm.model import validate
    from ansible_collections.msa.hpc.plugins.module_utils.slurm.render import fill_leader, plan
    from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.slurm.packjob_cases import SYSTEM, coupled_job
    spec = coupled_job(gateways=1, nam="1537M", gce=True)   # the leader on cm, the NAM reached from esb
    spec["components"][1]["partition"] = "esb"
    del spec["components"][1]["module"]
    spec["components"].append({"partition": "dam", "nodes": 1, "delay": 5, "command": "./late"})
    system = dict(SYSTEM, partitions=dict(SYSTEM["partitions"], esb={"nodes": 8}, dam={"nodes": 2}))
    main, delayed = plan(validate(spec, system))[:2]
    delayed = fill_leader(delayed, 4321)
    for sub, offset in ((main, 0), (delayed, NO_VAL)):
        # the leader's (first) component: slurmctld calls job_submit.lua once per component
        lines = sub["script"].split("#SBATCH hetjob")[0].splitlines()
        directives = dict(line[len("#SBATCH --"):].split("=", 1) for line in lines
                          if line.startswith("#SBATCH --") and "=" in line)
        job = {"partition": directives["partition"], "comment": directives["comment"], "het_job_offset": offset}
        if "licenses" in directives:
            job["licenses"] = directives["licenses"]
        job.update(dict(a[2:].split("=", 1) for a in sub["argv"] if a.startswith("--dependency=")))
        out = translate({}, **job)
        assert out["rc"] == "translated", (sub["role"], job, out)
        assert out["comment"] == directives["comment"] and out.get("licenses") == directives.get("licenses")
    assert "nam_bytes=" in main["script"] and "delay_after=4321" in delayed["script"]


def test_lua_a_single_job_off_the_extoll_fabric_is_still_refused_nam_from_its_comment():
    out = translate({}, partition="cm", comment="msa:nam_bytes=1073741824", licenses="nam:1")
    assert out["rc"] == "refused" and "partition cm is not on the EXTOLL fabric" in out["msg"]
