# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""manager.conf and users.conf of the NAM/GCE manager: what they accept, and errors that name file, section and key."""

import time

import pytest

from msa_sim.nammgr import config as C
from msa_sim.nammgr.__main__ import main
from msa_sim.nammgr.auth import AuthError, Authenticator, Principal, hash_password, parse_users, verify_password

GOOD = """
[manager]
listen = 0.0.0.0
port = 8780
admin_reserve_percent = 10
aat_size = 64
[nam:nam01]
node_id = 129
capacity = 64G
nonvolatile_capacity = 1T
aat_size = 128
[nam:nam02]
capacity = 32G
admin_reserve_percent = 0
[gce:gce01]
node_id = 130
"""


def test_a_full_config_gives_every_board_its_capacity_aat_and_reserve():
    cfg = C.parse(GOOD, "manager.conf")
    assert (cfg.listen, cfg.port, cfg.granularity, cfg.synchronous) == ("0.0.0.0", 8780, 4096, "full")
    nam01, nam02 = cfg.nam_devices
    assert (nam01["capacity"], nam01["nonvolatile_capacity"], nam01["aat_size"], nam01["reserve_percent"]) == \
        (64 << 30, 1 << 40, 128, 10.0)
    assert (nam02["aat_size"], nam02["reserve_percent"], nam02["node_id"]) == (64, 0.0, None)
    assert cfg.gce_devices == [{"name": "gce01", "node_id": 130, "data_url": ""}]



def test_drop_ins_of_manager_conf_d_add_the_installations_own_settings(tmp_path):
    """The harness puts its stand-in boards' data paths into manager.conf.d/; a drop-in's error names its file."""
    conf = tmp_path / "manager.conf"
    conf.write_text(GOOD)
    (tmp_path / "manager.conf.d").mkdir()
    (tmp_path / "manager.conf.d" / "50-boards.conf").write_text(
        "[manager]\ncapability_ttl = 60\n[gce:gce01]\ndata_url = https://10.0.0.9:8790\n")
    (tmp_path / "manager.conf.d" / "ignored.txt").write_text("[manager]\nport = 1\n")
    cfg = C.load(str(conf))
    assert cfg.capability_ttl == 60 and cfg.port == 8780
    assert cfg.gce_devices == [{"name": "gce01", "node_id": 130, "data_url": "https://10.0.0.9:8790"}]
    (tmp_path / "manager.conf.d" / "60-bad.conf").write_text("[manager]\nportt = 1\n")
    with pytest.raises(C.ConfigError, match="unknown keys portt"):
        C.load(str(conf))
    (tmp_path / "manager.conf.d" / "60-bad.conf").write_text("no section\n")
    with pytest.raises(C.ConfigError, match="60-bad.conf"):
        C.load(str(conf))

@pytest.mark.parametrize("text, fragment", [
    ("[manager]\nportt = 1\n", "unknown keys portt"),
    ("[nam:x]\nnode_id = 1\n", "[nam:x]: capacity is missing"),
    ("[nam:x]\ncapacity = lots\n", "[nam:x] capacity = 'lots'"),
    ("[nam:x]\ncapacity = 1000\n", "not a multiple of the granularity"),
    ("[manager]\nadmin_reserve_percent = 120\n", "admin_reserve_percent = '120' is outside 0..100"),
    ("[manager]\nsynchronous = sometimes\n", "synchronous = 'sometimes'"),
    ("[nvme:x]\n", "section [nvme:x] is not"),
    ("[nam:x]\ncapacity = 1G\nspeed = 3\n", "unknown keys speed"),
])
def test_bad_configs_name_file_section_and_key(text, fragment):
    with pytest.raises(C.ConfigError) as exc:
        C.parse(text, "/etc/nam-manager/manager.conf")
    assert fragment in str(exc.value) and str(exc.value).startswith("/etc/nam-manager/manager.conf")


def test_users_file_lines_are_checked_with_line_numbers():
    good = "# comment\nalice:user:%s\n" % hash_password("x", iterations=1000)
    assert parse_users(good)["alice"][0] == "user"
    with pytest.raises(AuthError) as exc:
        parse_users(good + "bob:root:%s\n" % hash_password("x", iterations=1000), "users.conf")
    assert "users.conf line 3: role 'root'" in str(exc.value)
    with pytest.raises(AuthError) as exc:
        parse_users("carol:user:plaintext\n", "users.conf")
    assert "line 1" in str(exc.value)


def test_passwords_verify_only_against_their_hash():
    hashed = hash_password("s3cret", iterations=1000)
    assert verify_password("s3cret", hashed) and not verify_password("s3cret ", hashed)


def test_tokens_expire_and_die_with_their_user(tmp_path):
    users = tmp_path / "users.conf"
    users.write_text("alice:admin:%s\n" % hash_password("pw", iterations=1000))
    auth = Authenticator(str(users), str(tmp_path / "key"), token_ttl=60)
    assert auth.basic("alice", "pw").role == "admin" and auth.basic("alice", "nope") is None
    token, _ = auth.issue(Principal("alice", "admin"))
    assert auth.bearer(token).name == "alice"
    assert auth.bearer(token[:-1] + ("0" if token[-1] != "0" else "1")) is None
    old, _ = auth.issue(Principal("alice", "admin"), ttl=-1)
    assert auth.bearer(old) is None
    again = Authenticator(str(users), str(tmp_path / "key"))
    assert again.bearer(token).name == "alice"                     # the key survives a restart
    users.write_text("alice:user:%s\n" % hash_password("pw", iterations=1000))
    time.sleep(0.01)
    users.touch()
    assert auth.bearer(token) is None                              # demoted: the admin token is void


def test_serve_refuses_a_bad_config_with_exit_2(tmp_path, capsys):
    conf = tmp_path / "manager.conf"
    conf.write_text("[nam:x]\n")
    assert main(["serve", "--config", str(conf)]) == 2
    assert "capacity is missing" in capsys.readouterr().err
