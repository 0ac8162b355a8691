# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The msa-container wrapper of role msa.hpc.udocker, against a stand-in udocker that records what it is asked."""

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import ssl
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ansible_collections.msa.hpc.tests.unit.plugins.module_utils.faulty_http import FaultyServer, free_port
from msa_sim.bmc.testing import make_tls

BUNDLE = Path(__file__).resolve().parents[1]
WRAPPER = BUNDLE / "collections/ansible_collections/msa/hpc/roles/udocker/files/msa_container.py"


def _load():
    loader = importlib.machinery.SourceFileLoader("msa_container", str(WRAPPER))
    spec = importlib.util.spec_from_loader("msa_container", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


mc = _load()

# A stand-in for udocker: create makes a container directory with a root file system holding passwd/group and a
# real ELF program, import adds the repository tag, run prints its arguments and exits with $FAKE_RC.
FAKE_UDOCKER = textwrap.dedent("""\
    #!%s
    import json, os, shutil, sys
    args = [a for a in sys.argv[1:] if a not in ("--quiet", "--allow-root")]
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(json.dumps(args) + "\\n")
    cmd = args[0]
    if cmd == "create":
        name = args[1].split("=", 1)[1]
        top = os.path.join(os.environ["HOME"], ".udocker", "containers")
        root = os.path.join(top, "c1", "ROOT")
        os.makedirs(os.path.join(root, "etc"))
        os.makedirs(os.path.join(root, "usr", "bin"))
        shutil.copy(os.environ["FAKE_ELF"], os.path.join(root, "usr", "bin", "env"))
        for f in ("passwd", "group"):
            open(os.path.join(root, "etc", f), "w").write("root:x:0:0:root:/root:/bin/bash\\n" if f == "passwd" else "root:x:0:\\n")
        os.symlink("c1", os.path.join(top, name))
    elif cmd == "import":
        repo, tag = args[-1].split(":")
        path = os.path.join(os.environ["FAKE_REPO"], "repos", repo, tag)
        os.makedirs(path, exist_ok=True)
        open(os.path.join(path, "TAG"), "w").write(args[-1])
        os.remove(args[-2])
    elif cmd == "run":
        print("RUN " + " ".join(args[1:]))
        sys.exit(int(os.environ.get("FAKE_RC", "0")))
    """)


@pytest.fixture
def node(tmp_path):
    """A node: config, shared repository, a user's home and the stand-in udocker."""
    fake = tmp_path / "udocker"
    fake.write_text(FAKE_UDOCKER % sys.executable)
    fake.chmod(0o755)
    repo = tmp_path / "repo"
    (repo / "repos").mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    dev = tmp_path / "nvidia0"
    dev.write_text("")
    conf = {"udocker": str(fake), "engine": "F1", "repo_dir": str(repo), "devices": [str(dev), "/dev/nosuch0"],
            "libraries": [str(tmp_path / "lib*.so.1")], "volumes": []}
    (tmp_path / "libcuda.so.1").write_text("")
    (tmp_path / "conf.json").write_text(json.dumps(conf))
    env = dict(os.environ, HOME=str(home), FAKE_LOG=str(tmp_path / "log"), FAKE_REPO=str(repo),
               FAKE_ELF=os.path.realpath(shutil.which("env")), MSA_CONTAINER_CONFIG=str(tmp_path / "conf.json"))
    env.pop("UDOCKER_DIR", None)
    env.pop("UDOCKER_CONTAINERS", None)
    return {"tmp": tmp_path, "conf": conf, "env": env, "repo": repo, "home": home, "dev": dev}


def _configure(node, **settings):
    """Add ``settings`` to the node's wrapper configuration."""
    node["conf"].update(settings)
    (node["tmp"] / "conf.json").write_text(json.dumps(node["conf"]))


def _wrapper(node, *args, rc=0):
    env = dict(node["env"], FAKE_RC=str(rc))
    return subprocess.run([sys.executable, str(WRAPPER)] + list(args), capture_output=True, text=True, env=env,
                          cwd=node["home"], timeout=60)


def _calls(node):
    path = node["tmp"] / "log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _tarball(node, content=b"rootfs"):
    path = node["tmp"] / "demo_1.tar.gz"
    path.write_bytes(content)
    return str(path), hashlib.sha256(content).hexdigest()


def test_import_happens_once_and_again_only_when_the_tarball_changes(node):
    path, sha = _tarball(node)
    first = _wrapper(node, "--import", "demo:1", path, sha)
    again = _wrapper(node, "--import", "demo:1", path, sha)
    assert (first.stdout.strip(), again.stdout.strip()) == ("imported", "unchanged"), first.stderr
    assert [c[0] for c in _calls(node)] == ["import"]
    assert os.path.exists(path), "the store's tarball must stay where it is"
    newer, newer_sha = _tarball(node, b"rootfs v2")
    assert _wrapper(node, "--import", "demo:1", newer, newer_sha, "--dry-run").stdout.strip() == "would import"
    assert _wrapper(node, "--import", "demo:1", newer, newer_sha).stdout.strip() == "imported"
    assert [c[0] for c in _calls(node)] == ["import", "rmi", "import"]


def test_a_tarball_with_another_checksum_is_not_imported(node):
    path, _sha = _tarball(node)
    proc = _wrapper(node, "--import", "demo:1", path, "0" * 64)
    assert proc.returncode == mc.EXIT_WRAPPER
    assert "the store lists " + "0" * 64 in proc.stderr
    assert _calls(node) == []


@pytest.mark.parametrize("fault", ["half", "refused"])
def test_an_image_store_that_fails_mid_download_is_a_clean_failure(node, fault):
    ca, pair = make_tls(str(node["tmp"]))
    _configure(node, store_ca=ca)
    if fault == "refused":
        url = "https://127.0.0.1:%d/demo.tar" % free_port()
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pair["cert"], pair["key"])
        store = FaultyServer(script=[fault], tls=context)
        url = store.url + "/demo.tar"
    try:
        proc = _wrapper(node, "--import", "demo:1", url, "0" * 64)
    finally:
        if fault != "refused":
            store.close()
    assert proc.returncode == mc.EXIT_WRAPPER and "Traceback" not in proc.stderr
    reason = "IncompleteRead" if fault == "half" else "Connection refused"
    assert "downloading %s failed" % url in proc.stderr and reason in proc.stderr, proc.stderr
    assert _calls(node) == []


def test_command_runs_in_the_users_container_with_its_exit_code_and_output(node):
    path, sha = _tarball(node)
    _wrapper(node, "--import", "demo:1", path, sha)
    proc = _wrapper(node, "demo:1", "--", "sh", "-c", "exit 3", rc=3)
    assert proc.returncode == 3, proc.stderr
    run = proc.stdout.strip()
    name = mc.container_name("demo", "1", sha, "F1")
    assert run.endswith(" %s sh -c exit 3" % name)
    assert "--user=%d:%d" % (os.getuid(), os.getgid()) in run and "--nosysdirs" in run
    assert "--volume=%s" % node["dev"] in run and "/dev/nosuch0" not in run
    assert "--volume=%s" % (node["tmp"] / "libcuda.so.1") in run
    assert "--volume=%s" % node["home"] in run and "--workdir=%s" % node["home"] in run
    assert [c[0] for c in _calls(node)] == ["import", "create", "setup", "run"]
    assert ["setup", "--execmode=F1", name] in _calls(node)


def test_the_container_is_created_once_and_gets_the_loader_and_the_users_account(node):
    path, sha = _tarball(node)
    _wrapper(node, "--import", "demo:1", path, sha)
    _wrapper(node, "demo:1", "true")
    _wrapper(node, "demo:1", "true")
    assert [c[0] for c in _calls(node)].count("create") == 1
    container = node["home"] / ".udocker" / "containers" / "c1"
    assert (container / "ld.so.path").read_text().strip() == mc.elf_interpreter(os.path.realpath(shutil.which("env")))
    passwd = (container / "ROOT" / "etc" / "passwd").read_text().splitlines()
    assert sum(1 for line in passwd if line.split(":")[2] == str(os.getuid())) == 1


def test_another_engine_or_a_reimported_image_gets_its_own_container():
    names = {mc.container_name("demo", "1", "a" * 64, "F1"), mc.container_name("demo", "1", "a" * 64, "P1"),
             mc.container_name("demo", "1", "b" * 64, "F1")}
    assert len(names) == 3
    assert all("." not in n and "/" not in n for n in names | {mc.container_name("site/app", "v1.2", "c", "F1")})


def test_an_image_the_node_has_not_imported_fails_with_125_and_lists_what_it_has(node):
    path, sha = _tarball(node)
    _wrapper(node, "--import", "demo:1", path, sha)
    proc = _wrapper(node, "other:2", "--", "true")
    assert proc.returncode == mc.EXIT_WRAPPER
    assert "image other:2 is not imported" in proc.stderr and "available: demo:1" in proc.stderr
    assert _wrapper(node, "--images").stdout.split() == ["demo:1"]


@pytest.mark.parametrize("image", ["Demo:1", "demo:1;true", "../x", "a//b", ""])
def test_bad_image_names_are_refused(image):
    with pytest.raises(mc.WrapperError):
        mc.split_image(image)


def test_elf_interpreter_of_a_host_program_is_its_loader():
    loader = mc.elf_interpreter(os.path.realpath(shutil.which("env")))
    assert loader and loader.startswith("/") and "ld-" in loader
    assert mc.elf_interpreter(__file__) is None


def test_volumes_skip_the_root_directory_and_missing_paths_and_list_each_once():
    conf = {"devices": ["/dev/null", "/dev/nosuch"], "libraries": [], "volumes": ["/tmp:/scratch"]}
    paths = mc.volumes(conf, home="/tmp", cwd="/", exists=lambda p: p != "/dev/nosuch")
    assert "/" not in paths and "/dev/nosuch" not in paths
    assert paths.count("/dev/null") == 1 and paths.count("/tmp") == 1 and "/tmp:/scratch" in paths


class _Store:
    """The site's image store in small: a directory served over https with one Basic account."""

    def __init__(self, directory, pair, account="images:secret"):
        import base64
        import functools
        import http.server
        import threading

        want = "Basic " + base64.b64encode(account.encode()).decode()

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                if self.headers.get("Authorization") != want:
                    self.send_error(401)
                    return
                super().do_GET()

            def log_message(self, *_args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      functools.partial(Handler, directory=str(directory)))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pair["cert"], pair["key"])
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = "https://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def store(node):
    """The store with two images and a stray file in its index, and the node set up to sync from it."""
    directory = node["tmp"] / "store"
    directory.mkdir()
    sums = []
    for name, content in (("demo_1.tar.gz", b"demo rootfs"), ("tools_2.0.tar", b"tools rootfs"),
                          ("README", b"not an image")):
        (directory / name).write_bytes(content)
        sums.append("%s  %s" % (hashlib.sha256(content).hexdigest(), name))
    (directory / "SHA256SUMS").write_text("\n".join(sums + ["garbage line"]) + "\n")
    ca, pair = make_tls(str(node["tmp"]))
    account = node["tmp"] / "account"
    account.write_text("images:secret\n")
    served = _Store(directory, pair)
    _configure(node, store_ca=ca, store_credentials=str(account), store_url=served.url)
    yield {"dir": directory, "url": served.url, "account": account}
    served.close()


def test_sync_imports_the_stores_images_once_and_says_what_it_did(node, store):
    proc = _wrapper(node, "--sync", "--dry-run")
    assert json.loads(proc.stdout) == {"demo:1": "would import", "tools:2.0": "would import"}, proc.stderr
    assert _calls(node) == []
    proc = _wrapper(node, "--sync")
    assert json.loads(proc.stdout) == {"demo:1": "imported", "tools:2.0": "imported"}, proc.stderr
    assert json.loads(_wrapper(node, "--sync").stdout) == {"demo:1": "unchanged", "tools:2.0": "unchanged"}
    assert [c[0] for c in _calls(node)] == ["import", "import"]


def test_sync_imports_only_the_images_asked_for(node, store):
    _configure(node, store_images=["tools:2.0"])
    assert json.loads(_wrapper(node, "--sync").stdout) == {"tools:2.0": "imported"}
    _configure(node, store_images="some")
    proc = _wrapper(node, "--sync")
    assert proc.returncode == mc.EXIT_WRAPPER and "store_images: 'some' is neither" in proc.stderr


def test_sync_with_a_wrong_account_or_no_store_fails_naming_why_and_imports_nothing(node, store):
    store["account"].write_text("images:guess\n")
    proc = _wrapper(node, "--sync")
    assert proc.returncode == mc.EXIT_WRAPPER and "/SHA256SUMS: the image store answered HTTP 401" in proc.stderr
    _configure(node, store_url="")
    proc = _wrapper(node, "--sync")
    assert proc.returncode == mc.EXIT_WRAPPER and "store_url is not set" in proc.stderr
    assert _calls(node) == []


def test_a_tarball_the_index_does_not_match_stops_the_sync_naming_the_image(node, store):
    (store["dir"] / "tools_2.0.tar").write_bytes(b"tampered")
    proc = _wrapper(node, "--sync")
    assert proc.returncode == mc.EXIT_WRAPPER
    assert "tools:2.0: " in proc.stderr and "the store lists" in proc.stderr and '"demo:1": "imported"' in proc.stderr
