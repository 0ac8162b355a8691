# SPDX-License-Identifier: GPL-3.0-or-later
"""The site's image store (msa.hpc.udocker, files/msa_image_store.py) serves its files over https to its one account
only, and msa-container imports from it only over https, verifying the store against the configured CA."""
from __future__ import annotations

import base64
import hashlib
import http.client
import importlib.util
import socket
import ssl
import sys
import threading

import pytest

from msa_sim.bmc.testing import make_tls
from test_udocker_wrapper import BUNDLE, _calls, _configure, _wrapper, mc, node  # noqa: F401  (node: a fixture)

ROLE_FILES = BUNDLE / "collections/ansible_collections/msa/hpc/roles/udocker/files"
MODULE_UTILS = BUNDLE / "collections/ansible_collections/msa/hpc/plugins/module_utils/node"
PASSWORD = "s3cret-store"


def _load_store():
    # on a node tlsserver.py is installed beside the store's program; here it is found in module_utils/node
    sys.path.insert(0, str(MODULE_UTILS))
    try:
        spec = importlib.util.spec_from_file_location("msa_image_store", ROLE_FILES / "msa_image_store.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(MODULE_UTILS))
    return module


store_mod = _load_store()


@pytest.fixture
def store(node):
    """A store with one image tarball and its index, and the node's wrapper configured for it."""
    directory = node["tmp"] / "store"
    (directory / "sub").mkdir(parents=True)
    data = b"rootfs of demo:1"
    (directory / "demo_1.tar").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    (directory / "SHA256SUMS").write_text("%s  demo_1.tar\n" % sha)
    ca, pair = make_tls(str(node["tmp"]))
    server = store_mod.make_server("127.0.0.1", 0, str(directory), pair["cert"], pair["key"], "images", PASSWORD)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    account = node["tmp"] / "store.account"
    account.write_text("images:%s\n" % PASSWORD)
    account.chmod(0o600)
    _configure(node, store_ca=ca, store_credentials=str(account))
    try:
        yield {"url": "https://127.0.0.1:%d" % server.server_address[1], "port": server.server_address[1],
               "ca": ca, "sha": sha, "account": account}
    finally:
        server.shutdown()
        server.server_close()


def _get(store, path, user="images", password=PASSWORD, method="GET"):
    conn = http.client.HTTPSConnection("127.0.0.1", store["port"], timeout=5,
                                       context=ssl.create_default_context(cafile=store["ca"]))
    headers = {} if user is None else {
        "Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}
    conn.request(method, path, headers=headers)
    answer = conn.getresponse()
    body = answer.read()
    conn.close()
    return answer.status, dict(answer.getheaders()), body


def test_the_store_serves_its_files_to_its_account_only(store):
    assert _get(store, "/SHA256SUMS")[2].decode().startswith(store["sha"])
    assert _get(store, "/demo_1.tar", method="HEAD")[0] == 200
    for user, password in ((None, None), ("images", "wrong"), ("other", PASSWORD)):
        status, headers, body = _get(store, "/demo_1.tar", user, password)
        assert (status, body) == (401, b"") and headers["WWW-Authenticate"].startswith("Basic realm=")


def test_the_store_lists_no_directory_and_nothing_outside_it(store):
    assert _get(store, "/")[0] == 404 and _get(store, "/sub/")[0] == 404
    assert _get(store, "/../../etc/passwd")[0] == 404


def test_the_store_answers_no_plain_http(store):
    with socket.create_connection(("127.0.0.1", store["port"]), timeout=5) as sock:
        sock.sendall(b"GET /SHA256SUMS HTTP/1.0\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP") is False  # no HTTP answer: the handshake failed


def test_a_store_without_its_password_file_does_not_start(tmp_path, capsys):
    ca, pair = make_tls(str(tmp_path))
    assert store_mod.main(["--bind", "127.0.0.1", "--port", "0", "--directory", str(tmp_path),
                           "--cert", pair["cert"], "--key", pair["key"],
                           "--password-file", str(tmp_path / "none")]) == 1
    assert "msa-image-store: " in capsys.readouterr().err


def test_the_wrapper_imports_over_verified_https_with_the_account(node, store):
    proc = _wrapper(node, "--import", "demo:1", store["url"] + "/demo_1.tar", store["sha"])
    assert proc.stdout.strip() == "imported", proc.stderr
    assert [c[0] for c in _calls(node)] == ["import"]


@pytest.mark.parametrize("case", ["plain http", "no account", "wrong account", "unknown CA"])
def test_the_wrapper_refuses_an_unverified_or_unauthenticated_store(node, store, case):
    url = store["url"] + "/demo_1.tar"
    if case == "plain http":
        url = url.replace("https://", "http://")
    elif case == "no account":
        _configure(node, store_credentials="")
    elif case == "wrong account":
        store["account"].write_text("images:wrong\n")
    else:
        _configure(node, store_ca="")  # the system's CAs, which do not know the store's
    proc = _wrapper(node, "--import", "demo:1", url, store["sha"])
    assert proc.returncode == mc.EXIT_WRAPPER and "Traceback" not in proc.stderr
    expected = {"plain http": "is reached over https only", "no account": "answered HTTP 401",
                "wrong account": "answered HTTP 401", "unknown CA": "CERTIFICATE_VERIFY_FAILED"}[case]
    assert expected in proc.stderr, proc.stderr
    assert _calls(node) == []
