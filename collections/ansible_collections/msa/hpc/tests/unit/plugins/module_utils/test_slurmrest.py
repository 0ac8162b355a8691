# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""slurm_packjob's REST transport: sbatch plans as v0.0.38 submissions, records as over the CLI, clear failures."""

import json
import pathlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.msa.hpc.plugins.module_utils import _packjob as P
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient
from ansible_collections.msa.hpc.plugins.module_utils._slurmrest import (
    RestTransport, SlurmRestError, split_script, submission)

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "slurm"
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
    (sub,) = P.plan(P.validate(HETJOB))
    body = submission(sub["argv"], sub["script"])
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
    main, delayed = P.plan(P.validate(job))
    body = submission(P.fill_leader(delayed, 42)["argv"], P.fill_leader(delayed, 42)["script"], chdir="/home/w")
    assert body["job"]["dependency"] == "after:42+5"
    assert body["job"]["partition"] == "dam" and body["job"]["current_working_directory"] == "/home/w"
    assert "job" in submission(main["argv"], main["script"])


def test_a_module_list_of_one_shape_is_one_job_with_the_partition_list_over_rest_too():
    job = {"name": "any", "module_list": [{"partition": "esb", "command": "a"}, {"partition": "cm", "command": "a"}]}
    (sub,) = P.plan(P.validate(job))
    body = submission(sub["argv"], sub["script"])
    assert body["job"]["partition"] == "esb,cm" and "begin_time" not in body["job"]
    with pytest.raises(P.TransportError, match="--hold"):
        submission(["sbatch", "--hold"], sub["script"])


def test_an_sbatch_option_without_a_rest_counterpart_is_refused_by_name():
    with pytest.raises(P.TransportError, match="--exclusive"):
        submission(["sbatch", "--exclusive"], "#!/bin/bash\nsrun true\n")


def test_sbatch_lines_after_the_first_command_are_not_options():
    script = "#!/bin/bash\n#SBATCH --partition=cm\n#SBATCH hetjob\n#SBATCH --partition=esb\nsrun x\n#SBATCH --qos=y\n"
    assert split_script(script) == [["--partition=cm"], ["--partition=esb"]]


# --- the transport against a slurmrestd stand-in -------------------------------------------------------------------

def test_records_over_rest_are_the_records_over_the_command_line(slurmrestd):
    squeue = (FIXTURES / "squeue_22.05_hetjob.json").read_text()
    sacct = (FIXTURES / "sacct_22.05_hetjob.json").read_text()
    FakeSlurmrestd.queue, FakeSlurmrestd.accounting = json.loads(squeue), json.loads(sacct)
    transport = _transport(slurmrestd)
    assert transport.jobs() == P.parse_squeue_json(squeue)
    assert transport.history([1234]) == P.parse_sacct_json(sacct)
    users = {r["user"] for r in P.parse_squeue_json(squeue)}
    assert transport.jobs(user="nobody-here") == [] and users


def test_submit_sends_the_user_and_token_headers_and_returns_the_job_id(slurmrestd):
    (sub,) = P.plan(P.validate(HETJOB))
    job_id = _transport(slurmrestd).submit(sub["argv"], sub["script"])
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
    assert calls == [("DELETE", "/slurm/v0.0.38/job/13", None), ("DELETE", "/slurm/v0.0.38/job/14", None)]


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
        transport.submit(["sbatch", "--parsable"], "#!/bin/bash\n#SBATCH --partition=nope\nsrun true\n")
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
