# SPDX-License-Identifier: GPL-3.0-or-later
"""The DMTF's own conformance tools against one simulated BMC (TLS from a throwaway CA): the Redfish Protocol
Validator (SSDP discovery disabled by its launcher) and the Redfish Use Case Checkers. Their counts are printed;
any FAIL fails the test."""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest

from msa_sim.bmc import testing

HERE = os.path.dirname(os.path.abspath(__file__))
USERS = {"admin": ("Adm1n-pass", "Administrator"), "ops": ("0ps-passw", "Operator"),
         "viewer": ("v1ew-pass", "ReadOnly")}
# NOT_TESTED assertions of the protocol validator that this BMC cannot be tested on, and why (printed, not hidden)
EXPECTED_NOT_TESTED = {
    "SERV_SSDP_": "SSDP is off: the launcher disables discovery (it multicasts off the machine) and the BMC "
                  "does not answer SSDP (ManagerNetworkProtocol SSDP.ProtocolEnabled false)",
    "SERV_SSE_": "no ServerSentEventUri: events are pushed to subscribers (EventDestination), SSE is optional",
    "SEC_SESSION_TERMINATION_SIDE_EFFECTS": "needs an SSE stream",
    "PROTO_REDIRECT_ENFORCES_TARGET_PRIVS": "the BMC serves HTTPS only (no HTTP port to redirect from)",
    "REQ_HEADERS_ACCEPT": "no /redfish/v1/openapi.yaml (optional)",
    "RESP_HEADERS_CONTENT_TYPE": "no /redfish/v1/openapi.yaml (optional)",
    "REQ_QUERY_INVALID_VALUES": "query parameters are not supported (ProtocolFeaturesSupported says so; $ "
                                "parameters answer 501)",
    "RESP_STATUS_INTERNAL_SERVER_ERROR": "the tool found no 500 answer to look at",
    "REQ_DATA_MOD_ERRORS": "the tool found no failed POST to look at",
    "SEC_DEFAULT_CERT_REPLACE": "no CertificateService (the certificate comes from the harness's CA)",
}


def _tool(module):
    try:
        __import__(module)
    except ImportError:
        pytest.fail("%s is not installed: run `pip install -r requirements.txt` (it pins the DMTF tools)" % module)


@pytest.fixture(scope="module")
def bmc(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("dmtf-bmc"))
    ca, tls = testing.make_tls(directory)
    service = testing.start(directory, [{"name": "n1", "nics": [{"mac": "02:00:00:00:00:01", "ipv4": "10.0.0.1/24"}]}],
                            USERS, defaults={"tls": tls, "update_seconds": 0.2})
    yield {"url": service.url("n1"), "ca": ca, "dir": directory}
    service.stop()


def _run(args, cwd):
    proc = subprocess.run([sys.executable] + args, cwd=cwd, capture_output=True, text=True, timeout=900)
    return proc.stdout + proc.stderr


def test_redfish_protocol_validator_finds_no_failure(bmc, capsys):
    _tool("redfish_protocol_validator")
    reports = os.path.join(bmc["dir"], "rpv")
    out = _run([os.path.join(HERE, "rpv_offline.py"), "--rhost", bmc["url"], "-u", "admin", "-p",
                USERS["admin"][0], "--ca-bundle", bmc["ca"], "--report-dir", reports, "--report-type", "tsv",
                "--avoid-http-redirect"], bmc["dir"])
    summary = re.search(r"Summary - PASS: (\d+), WARN: (\d+), FAIL: (\d+), NOT_TESTED: (\d+)", out)
    assert summary, "the protocol validator printed no summary:\n" + out[-3000:]
    passed, warned, failed, untested = (int(n) for n in summary.groups())
    rows = []
    for path in glob.glob(os.path.join(reports, "*.tsv")):
        with open(path, encoding="utf-8") as handle:
            rows += [line.rstrip("\n").split("\t") for line in handle]
    problems = [r for r in rows if len(r) > 5 and r[4] in ("FAIL", "WARN")]
    untested_rows = [r for r in rows if len(r) > 5 and r[4] == "NOT_TESTED"]
    unexplained = [r for r in untested_rows if not any(r[0].startswith(k) for k in EXPECTED_NOT_TESTED)]
    with capsys.disabled():
        print("\nredfish-protocol-validator: PASS %d, WARN %d, FAIL %d, NOT_TESTED %d" % (
            passed, warned, failed, untested))
        for row in problems:
            print("  %s %s %s %s: %s" % (row[4], row[0], row[1], row[3], row[5]))
        for prefix, reason in EXPECTED_NOT_TESTED.items():
            count = sum(1 for r in untested_rows if r[0].startswith(prefix))
            if count:
                print("  NOT_TESTED %-40s x%d: %s" % (prefix, count, reason))
        for row in unexplained:
            print("  NOT_TESTED (unexplained) %s %s: %s" % (row[0], row[3], row[5]))
    assert failed == 0, "the protocol validator failed %d assertions (listed above)" % failed
    assert passed >= 300, "only %d assertions passed: the validator did not reach the service" % passed
    assert not unexplained, "NOT_TESTED assertions without a stated reason: %s" % [r[0] for r in unexplained]


def test_redfish_use_case_checkers_find_no_failure(bmc, capsys):
    _tool("redfish_use_case_checkers")
    out = _run([os.path.join(HERE, "rucc_verified.py"), "--ca-bundle", bmc["ca"], "--rhost", bmc["url"], "-u",
                "admin", "-p", USERS["admin"][0], "--report-dir", os.path.join(bmc["dir"], "rucc")], bmc["dir"])
    table = re.search(r"PASS\s*\|\s*WARN\s*\|\s*FAIL\s*\|\s*NOT TESTED\s*\|\s*\n[+-]+\n\|\s*(\d+)\s*\|\s*(\d+)\s*\|"
                      r"\s*(\d+)\s*\|\s*(\d+)\s*\|", out)
    assert table, "the use case checkers printed no summary:\n" + out[-3000:]
    passed, warned, failed, untested = (int(n) for n in table.groups())
    logs = glob.glob(os.path.join(bmc["dir"], "rucc", "*", "*.log"))
    lines = []
    for path in logs:
        with open(path, encoding="utf-8") as handle:
            lines += handle.read().splitlines()
    with capsys.disabled():
        print("\nredfish-use-case-checkers: PASS %d, WARN %d, FAIL %d, NOT TESTED %d" % (
            passed, warned, failed, untested))
        for index, line in enumerate(lines):
            if " - ERROR - " in line or " - WARNING - " in line:
                print("  " + " | ".join(lines[max(0, index - 2):index + 1])[-400:])
        print("  NOT TESTED: query parameters ($filter, $select, $expand, only) are not offered "
              "(ProtocolFeaturesSupported false); enabling an enabled account and clearing a password-change "
              "requirement nobody set are skipped by the tool; VLANs and IPv6 gateways do not exist here")
    assert failed == 0, "the use case checkers failed %d checks (ERROR lines above)" % failed
    assert passed >= 30, "only %d checks passed: the checkers did not reach the service" % passed
