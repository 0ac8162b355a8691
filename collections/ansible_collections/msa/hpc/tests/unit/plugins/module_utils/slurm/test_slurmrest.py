# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""slurm_packjob's REST transport: sbatch plans as v0.0.38 submissions, records as over the CLI, clear failures."""

import json
import pathlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient
from ansible_collections.msa.hpc.plugins.module_utils.slurm.model import validate
from ansible_collections.msa.hpc.plugins.module_utils.slurm.records import (
    TransportError, parse_sacct_json, parse_squeue_json)
from ansible_collections.msa.hpc.plugins.module_utils.slurm.render import fill_leader, plan
from ansible_collections.msa.hpc.plugins.module_utils.slurm.rest import (
    RestTransport, SlurmRestError, refused_credentials, submission)

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "slurm"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.alice-secret-part.signature"
OTHER_TOKEN = "eyJhbGciOiJIUzI1NiJ9.bob-secret-part.signature"


class FakeSlurmrestd(BaseHTTPRequestHandler):
    """Answers like slurmrestd 22.05 with JWT: a token it cannot verify for the user gets a bare 500."""

    tokens = {"alice": TOKEN, "bob": OTHER_TOKEN}
    submitted, requests, next_id = [], [], 700
    queue = {"meta": {}, "errors": [], "jobs": []}
    accounting = {"meta": {}, "errors": [], "jobs": []}

    def log_message(self, *args):
        pass

    def _send(self, status, body):
        raw = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _answer(self):
        cls = FakeSlurmrestd
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        cls.requests.append((self.command, self.path, dict(self.headers), body))
        user, token = self.headers.get("X-SLURM-USER-NAME"), self.headers.get("X-SLURM-USER-TOKEN")
        if cls.tokens.get(user) != token:   # what slurmrestd 22.05 answers (measured on dev2)
            return self._send(500, {"errors": [{"description": "Failed while looking for jobs", "error_number": -1,
                                                "error": "Unspecified error", "source": "slurm_load_jobs"}],
                                    "jobs": []})
        if (self.command, self.path) == ("POST", "/slurm/v0.0.38/job/submit"):
            parts = body.get("jobs") or [body.get("job")]
            if any(p.get("partition") == "nope" for p in parts):
                return self._send(500, {"errors": [{"error": "Invalid partition name specified",
                                                    "error_number": 2000}], "job_id": None})
            cls.next_id += 10
            cls.submitted.append(body)
            return self._send(200, {"errors": [], "job_id": cls.next_id, "step_id": "batch"})
        if (self.command, self.path) == ("GET", "/slurm/v0.0.38/jobs"):
            return self._send(200, cls.queue)
        if self.command == "GET" and self.path.startswith("/slurmdb/v0.0.38/job/"):
            return self._send(200, cls.accounting)
        if self.command in ("POST", "DELETE") and self.path.startswith("/slurm/v0.0.38/job/"):
            return self._send(200, {"errors": []})
        if self.path == "/slurm/v0.0.38/ping":
            return self._send(200, {"errors": [], "pings": [{"hostname": "mgmt01", "ping": "UP"}]})
        return self._send(404, None)

    do_GET = do_POST = do_DELETE = _answer


@pytest.fixture
def slurmrestd():
    cls = FakeSlurmrestd
    cls.submitted, cls.requests, cls.next_id = [], [], 700
    cls.queue = {"meta": {}, "errors": [], "jobs": []}
    cls.accounting = {"meta": {}, "errors": [], "jobs": []}
    srv = ThreadingHTTPServer(("127.0.0.1", 0), cls)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()


def _transport(url, user="alice", token=TOKEN):
    return RestTransport(url, user, token, timeout=5, retries=0)


HETJOB = {"name": "coupled", "gateways": 2, "nam": "1GiB", "components": [
    {"partition": "cm", "nodes": 1, "ntasks": 2, "time": "10:00", "command": "hostname"},
    {"partition": "esb", "nodes": 2, "gres": "gpu:1", "command": "hostname"}]}


# --- sbatch plans as submissions -----------------------------------------------------------------------------------

def test_a_heterogeneous_plan_becomes_one_submission_with_a_job_per_component():
    (sub,) = plan(validate(HETJOB))
    body = submission(sub)
    assert body["script"] == sub["script"] and "job" not in body
    first, second = body["jobs"]
    assert first["name"] == second["name"] == "coupled"
    assert (first["partition"], first["nodes"], first["tasks"], first["time_limit"]) == ("cm", "1", "2", "10:00")
    assert first["licenses"] == "gateway:2,nam:1" and first["comment"].startswith("msa:gw_num=2")
    assert (second["partition"], second["nodes"], second["gres"]) == ("esb", "2", "gpu:1")
    assert "licenses" not in second
    assert all(j["environment"]["PATH"] and j["current_working_directory"] == "/tmp" for j in body["jobs"])


def test_command_line_options_apply_to_the_first_component_and_win():
    job = {"name": "w", "components": [{"partition": "esb", "command": "a"},
                                       {"partition": "dam", "command": "b", "delay": 5}]}
    main, delayed = plan(validate(job))
    body = submission(fill_leader(delayed, 42), chdir="/home/w")
    assert body["job"]["dependency"] == "after:42+5" and "delay_after=42" in body["job"]["comment"]
    assert body["job"]["partition"] == "dam" and body["job"]["current_working_directory"] == "/home/w"
    assert "job" in submission(main)


def test_a_module_list_of_one_shape_is_one_job_with_the_partition_list_over_rest_too():
    job = {"name": "any", "module_list": [{"partition": "esb", "command": "a"}, {"partition": "cm", "command": "a"}]}
    (sub,) = plan(validate(job))
    body = submission(sub)
    assert body["job"]["partition"] == "esb,cm" and "begin_time" not in body["job"]
    with pytest.raises(TransportError, match="--hold"):
        submission(dict(sub, argv=["sbatch", "--hold"]))


def test_an_sbatch_option_without_a_rest_counterpart_is_refused_by_name():
    (sub,) = plan(validate({"name": "x", "components": [{"partition": "cm", "command": "true"}]}))
    with pytest.raises(TransportError, match="--exclusive"):
        submission(dict(sub, argv=["sbatch", "--exclusive"]))


def test_the_job_description_comes_from_the_model_not_from_the_scripts_sbatch_lines():
    # The script is handed on as it is; #SBATCH lines in it (or none) change no job property: no text round trip.
    (sub,) = plan(validate(HETJOB))
    edited = dict(sub, script="#!/bin/bash\n#SBATCH --partition=other\n#SBATCH --qos=y\nsrun x\n")
    body, from_edited = submission(sub), submission(edited)
    assert from_edited["script"] == edited["script"]
    assert from_edited["jobs"] == body["jobs"]
    assert {j["partition"] for j in body["jobs"]} == {"cm", "esb"} and all("qos" not in j for j in body["jobs"])


def _planned(case):
    subs = plan(validate(case["job"], case["system"]), chosen=case["chosen"])
    return [fill_leader(sub, 42) if sub["role"] == "delayed" else sub for sub in subs]


def test_every_body_built_from_the_model_is_the_one_the_old_script_parser_built():
    # rest_bodies_from_split_script.json: for every job spec the unit tests validate (slurm_packjob and its
    # module_utils, CLI and REST), the bodies the former split_script path (parsing the rendered #SBATCH lines)
    # produced, captured before it was removed; delayed parts with leader 42, chdir /tmp.
    cases = json.loads((FIXTURES / "rest_bodies_from_split_script.json").read_text())
    assert len(cases) >= 40 and any("jobs" in b for c in cases for b in c["bodies"])
    assert any(b.get("job", {}).get("dependency") for c in cases for b in c["bodies"])
    for case in cases:
        bodies = [submission(sub, None, "/tmp") for sub in _planned(case)]
        assert bodies == case["bodies"], case["job"]


# --- the transport against a slurmrestd stand-in -------------------------------------------------------------------

def test_records_over_rest_are_the_records_over_the_command_line(slurmrestd):
    squeue = (FIXTURES / "squeue_22.05_hetjob.json").read_text()
    sacct = (FIXTURES / "sacct_22.05_hetjob.json").read_text()
    FakeSlurmrestd.queue, FakeSlurmrestd.accounting = json.loads(squeue), json.loads(sacct)
    transport = _transport(slurmrestd)
    assert transport.jobs() == parse_squeue_json(squeue)
    assert transport.history([1234]) == parse_sacct_json(sacct)
    users = {r["user"] for r in parse_squeue_json(squeue)}
    assert transport.jobs(user="nobody-here") == [] and users


def test_submit_sends_the_user_and_token_headers_and_returns_the_job_id(slurmrestd):
    (sub,) = plan(validate(HETJOB))
    job_id = _transport(slurmrestd).submit(sub)
    assert job_id == 710
    method, path, headers, body = FakeSlurmrestd.requests[-1]
    headers = {k.lower(): v for k, v in headers.items()}   # HTTP header names are case-insensitive
    assert (method, path) == ("POST", "/slurm/v0.0.38/job/submit")
    assert headers["x-slurm-user-name"] == "alice" and headers["x-slurm-user-token"] == TOKEN
    assert "authorization" not in headers and len(body["jobs"]) == 2


def test_cancel_addresses_each_job(slurmrestd):
    transport = _transport(slurmrestd)
    transport.cancel([13, 14])
    calls = [(m, p, b) for m, p, _h, b in FakeSlurmrestd.requests]
    # 22.05's slurmrestd: v0.0.42 is not served (404), v0.0.38 answers the ping, and is spoken from then on
    assert calls == [("GET", "/slurm/v0.0.42/ping", None), ("GET", "/slurm/v0.0.38/ping", None),
                     ("DELETE", "/slurm/v0.0.38/job/13", None), ("DELETE", "/slurm/v0.0.38/job/14", None)]


@pytest.mark.parametrize("user,token", [("alice", "eyJ.wrong.token"), ("bob", TOKEN)],
                         ids=["wrong-token", "token-of-another-user"])
def test_a_token_slurmrestd_cannot_verify_fails_once_clearly_and_without_the_token(slurmrestd, user, token):
    with pytest.raises(SlurmRestError) as info:
        _transport(slurmrestd, user, token).jobs()
    text = str(info.value)
    assert info.value.kind == "auth"
    assert "rest_token" in text and "rest_user" in text and repr(user) in text
    assert token not in text and TOKEN not in text
    assert len(FakeSlurmrestd.requests) == 1   # a 500 is not retried


def test_a_refused_submission_reports_slurms_reason_not_the_credentials(slurmrestd):
    transport = _transport(slurmrestd)
    transport.jobs()
    with pytest.raises(SlurmRestError) as info:
        transport.submit(plan(validate({"name": "x", "components": [{"partition": "nope", "command": "true"}]}))[0])
    assert info.value.kind == "refused" and "Invalid partition name specified" in str(info.value)
    assert len([r for r in FakeSlurmrestd.requests if r[0] == "POST"]) == 1


def test_an_unreachable_endpoint_names_the_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    transport = RestTransport("http://127.0.0.1:%d" % port, "alice", TOKEN, timeout=2, retries=0)
    with pytest.raises(SlurmRestError) as info:
        transport.ping()
    assert info.value.kind == "unreachable" and "127.0.0.1:%d" % port in str(info.value)
    assert TOKEN not in str(info.value)


@pytest.mark.parametrize("user,token,field", [("", TOKEN, "rest_user"), ("alice", "", "rest_token")])
def test_missing_credentials_are_refused_before_any_call(user, token, field):
    with pytest.raises(SlurmRestError, match=field):
        RestTransport("http://127.0.0.1:1", user, token)


def test_a_client_with_narrow_retry_statuses_does_not_repeat_a_500(slurmrestd):
    sleeps = []
    client = RestClient(slurmrestd, token="x", token_header="X-SLURM-USER-TOKEN", retries=3, sleep=sleeps.append,
                        retry_statuses=(503,))
    with pytest.raises(Exception):
        client.get("/slurm/v0.0.38/jobs")
    assert sleeps == [] and len(FakeSlurmrestd.requests) == 1


# what slurmrestd answered on mini for a token slurmctld could not verify (24.11.5, GET /slurm/v0.0.42/jobs)
REFUSED_24_11 = {"errors": [{"description": "Unable to query jobs", "error_number": 1007,
                             "error": "Protocol authentication error", "source": "slurm_load_jobs"}], "jobs": []}


@pytest.mark.parametrize("status,payload,refused", [
    (511, REFUSED_24_11, True),
    (500, REFUSED_24_11, True),
    (500, {"errors": [{"error_number": -1, "error": "Unspecified error"}]}, True),
    (401, None, True),
    (500, {"errors": [{"error_number": 2000, "error": "Invalid partition name specified"}]}, False),
    (400, {"errors": [{"error_number": 9001, "error": "Unable to parse"}]}, False),
], ids=["24.11-511", "1007-in-a-500", "22.05-generic-500", "401", "bad-partition", "bad-request"])
def test_a_refused_credential_is_told_from_a_refused_request(status, payload, refused):
    assert refused_credentials(status, payload) is refused
