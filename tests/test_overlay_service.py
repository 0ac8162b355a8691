# SPDX-License-Identifier: GPL-3.0-or-later
"""The overlay service (issue 38) over TLS: msa-overlay-server serves each node its own overlay only (another node's
403, an unknown token 401, a malformed node name 400, nothing secret in any answer), and msa-overlay-apply fetches
it verifying the server against the system's CA, then applies it."""
from __future__ import annotations

import hashlib
import http.client
import json
import threading

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _overlay as O
from ansible_collections.msa.hpc.plugins.module_utils import _overlay_store as S
from ansible_collections.msa.hpc.plugins.module_utils._rest import tls_context
from ansible_collections.msa.hpc.plugins.module_utils.node import overlay_apply as A
from ansible_collections.msa.hpc.plugins.module_utils.node import overlay_server as V
from msa_sim.bmc.testing import make_tls

TOKENS = {"cm01": "tok-cm01-" + "a" * 34, "cm02": "tok-cm02-" + "b" * 34}
SECRET = "munge-key-of-cm01"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    ca, pair = make_tls(str(tmp_path_factory.mktemp("system")))
    rogue_ca, _ = make_tls(str(tmp_path_factory.mktemp("rogue")))
    return {"ca": ca, "cert": pair["cert"], "key": pair["key"], "rogue_ca": rogue_ca}


@pytest.fixture
def service(tmp_path, pki):
    store = tmp_path / "store"
    store.mkdir()
    S.publish(str(store), S.decode_request({
        "cm01": [{"dest": "/etc/msa-hpc/node.json", "content": '{"name": "cm01"}'},
                 {"dest": "/etc/munge/munge.key", "content": SECRET, "mode": "0400", "restart": "munge.service"}],
        "cm02": [{"dest": "/etc/msa-hpc/node.json", "content": '{"name": "cm02"}'}]}))
    tokens = tmp_path / "tokens"
    tokens.write_text("# node sha256\n" + "".join("%s %s\n" % (n, hashlib.sha256(t.encode()).hexdigest())
                                                  for n, t in TOKENS.items()))
    server = V.make_server("127.0.0.1", 0, str(store), str(tokens), pki["cert"], pki["key"])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield {"port": server.server_address[1], "store": store, "tokens": tokens, "server": server}
    finally:
        server.shutdown()
        server.server_close()


def get(service, pki, path, token=None, method="GET"):
    conn = http.client.HTTPSConnection("127.0.0.1", service["port"], timeout=10,
                                       context=tls_context(ca_path=pki["ca"]))
    try:
        conn.request(method, path, headers={"Authorization": "Bearer " + token} if token else {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_a_node_gets_its_own_overlay_and_its_hash(service, pki):
    status, body = get(service, pki, "/v1/overlay/cm01", TOKENS["cm01"])
    assert status == 200
    document = A.parse_overlay(body, "cm01")
    assert {e["path"]: e["data"] for e in document["files"]}["/etc/munge/munge.key"] == SECRET.encode()
    status, body = get(service, pki, "/v1/overlay/cm01/hash", TOKENS["cm01"])
    assert status == 200 and json.loads(body) == {"node": "cm01", "hash": document["hash"]}
    assert get(service, pki, "/v1/health")[0] == 200


@pytest.mark.parametrize("path", ["/v1/overlay/cm02", "/v1/overlay/cm02/hash"])
def test_a_nodes_token_asking_for_another_nodes_overlay_is_refused_403(service, pki, path):
    status, body = get(service, pki, path, TOKENS["cm01"])
    assert status == 403 and json.loads(body)["error"]["code"] == "forbidden"
    assert b"cm02" not in body and b"name" not in body


@pytest.mark.parametrize("token", [None, "wrong-token", TOKENS["cm01"] + "x", "a" * 600,
                                   hashlib.sha256(TOKENS["cm01"].encode()).hexdigest()])
def test_no_or_an_unknown_token_is_refused_401_before_anything_else(service, pki, token):
    for path in ("/v1/overlay/cm01", "/v1/overlay/../etc", "/v1/nothing"):
        status, body = get(service, pki, path, token)
        assert status == 401 and json.loads(body)["error"]["code"] == "unauthorized"
        assert SECRET.encode() not in body and b"cm01" not in body


@pytest.mark.parametrize("node", ["..", "%2e%2e", "cm01%2f..%2fcm02", "-x", "a" * 70, "cm01;cm02", ""])
def test_a_malformed_node_name_is_refused_400(service, pki, node):
    status, body = get(service, pki, "/v1/overlay/" + node, TOKENS["cm01"])
    assert status == 400 and json.loads(body)["error"]["code"] == "invalid"


def test_a_node_with_a_token_but_no_overlay_gets_404_and_a_damaged_store_500(service, pki):
    with open(service["tokens"], "a", encoding="utf-8") as handle:
        handle.write("cm03 %s\n" % hashlib.sha256(b"tok-cm03").hexdigest())
    status, body = get(service, pki, "/v1/overlay/cm03", "tok-cm03")
    assert status == 404, body
    blob = next((service["store"] / "cm01/blobs").iterdir())
    blob.write_bytes(b"tampered")
    status, body = get(service, pki, "/v1/overlay/cm01", TOKENS["cm01"])
    assert status == 500 and SECRET.encode() not in body


def test_a_bad_edit_of_the_digests_keeps_the_digests_read_before(service, pki):
    service["tokens"].write_text("cm01 not-a-digest\n")
    assert get(service, pki, "/v1/overlay/cm01/hash", TOKENS["cm01"])[0] == 200


@pytest.mark.parametrize("body, status", [(b"x" * 100, 413), (b"", 501)])
def test_the_server_reads_no_body_and_takes_no_other_method(service, pki, body, status):
    conn = http.client.HTTPSConnection("127.0.0.1", service["port"], timeout=10,
                                       context=tls_context(ca_path=pki["ca"]))
    try:
        conn.request("POST", "/v1/overlay/cm01", body=body, headers={"Authorization": "Bearer " + TOKENS["cm01"]})
        assert conn.getresponse().status == status
    finally:
        conn.close()


@pytest.mark.parametrize("text, says", [
    ("cm01 abc\n", "line 1: the digest of cm01 is not a SHA-256"),
    ("../x %s\n" % ("0" * 64), "line 1: node: '../x'"),
    ("cm01 %s\ncm02 %s\n" % ("0" * 64, "0" * 64), "line 2: cm02 has the same token as cm01"),
    ("cm01\n", "line 1: expected '<node> <sha256>', got 1 words"),
])
def test_the_digests_file_is_checked_naming_the_line(text, says):
    with pytest.raises(V.TokenError, match=says):
        V.parse_digests(text, "tokens")


def test_the_server_refuses_to_start_without_its_files(tmp_path, pki):
    with pytest.raises(V.TokenError, match="cannot read the token digests"):
        V.make_server("127.0.0.1", 0, str(tmp_path), str(tmp_path / "none"), pki["cert"], pki["key"])
    (tmp_path / "tokens").write_text("")
    with pytest.raises(OSError, match="not a directory"):
        V.make_server("127.0.0.1", 0, str(tmp_path / "none"), str(tmp_path / "tokens"), pki["cert"], pki["key"])


def client_config(tmp_path, service, ca, node="cm01", token=None):
    token_file = tmp_path / ("token-" + node)
    token_file.write_text((token or TOKENS[node]) + "\n")
    token_file.chmod(0o600)
    config = tmp_path / ("client-%s.json" % node)
    config.write_text(json.dumps({"url": "https://127.0.0.1:%d" % service["port"], "node": node, "ca_file": ca,
                                  "token_file": str(token_file), "state_dir": str(tmp_path / "state"),
                                  "retries": 0}))
    return str(config)


def test_the_client_fetches_its_overlay_verifying_the_server(service, pki, tmp_path):
    config = A.load_config(client_config(tmp_path, service, pki["ca"]))
    document = A.parse_overlay(A.fetch(config, A.read_token(config["token_file"])), "cm01")
    assert sorted(e["path"] for e in document["files"]) == ["/etc/msa-hpc/node.json", "/etc/munge/munge.key"]


def test_the_client_refuses_a_server_whose_certificate_is_not_from_its_ca(service, pki, tmp_path):
    config = A.load_config(client_config(tmp_path, service, pki["rogue_ca"]))
    with pytest.raises(A.FetchError, match="not from the CA in"):
        A.fetch(config, A.read_token(config["token_file"]))


@pytest.mark.parametrize("node, token, says", [
    ("cm02", TOKENS["cm01"], "403 a node's token reads that node's own overlay only"),
    ("cm01", "stolen-guess", "401 a node's overlay token is required"),
])
def test_the_client_fails_naming_the_refusal_and_changes_nothing(service, pki, tmp_path, capsys, node, token, says):
    config = client_config(tmp_path, service, pki["ca"], node=node, token=token)
    changed = []
    assert A.main(["--config", config], restart=lambda units, reload: changed.append(units)) == 1
    assert says in capsys.readouterr().err
    assert not (tmp_path / "state").exists() and not changed


def test_the_client_refuses_plain_http_and_a_readable_token(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"url": "http://127.0.0.1:1"}))
    with pytest.raises(O.OverlayError, match="is not https://<host>:<port>"):
        A.load_config(str(config), "cm01")
    token = tmp_path / "token"
    token.write_text("t\n")
    token.chmod(0o644)
    with pytest.raises(O.OverlayError, match="mode 0644 lets others read the token"):
        A.read_token(str(token))


def test_overlays_are_built_in_bounded_turns_one_per_node(service, pki):
    server = service["server"]
    server.build_wait = 0.2
    with server.builds_lock:
        server.building.add("cm01")
    status, body = get(service, pki, "/v1/overlay/cm01", TOKENS["cm01"])
    assert status == 503 and b"being sent already" in body
    with server.builds_lock:
        server.building.discard("cm01")
    taken = [server.builds.acquire(timeout=1) for _ in range(V.MAX_BUILDS)]
    try:
        status, body = get(service, pki, "/v1/overlay/cm01", TOKENS["cm01"])
        assert all(taken) and status == 503 and b"busy" in body
        assert get(service, pki, "/v1/overlay/cm01/hash", TOKENS["cm01"])[0] == 200  # the hash needs no turn
    finally:
        for _ in taken:
            server.builds.release()
    assert get(service, pki, "/v1/overlay/cm01", TOKENS["cm01"])[0] == 200 and not server.building
