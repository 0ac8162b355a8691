# SPDX-License-Identifier: GPL-3.0-or-later
"""The DMTF's own conformance tools against one simulated BMC (TLS from a throwaway CA): the Redfish Protocol
Validator (SSDP discovery disabled by its launcher), the Redfish Use Case Checkers and the Redfish Service
Validator (every resource against the DMTF CSDL bundle in ../shared/redfish-csdl). Their counts are printed;
any FAIL fails the test, and so does any service validator WARN not listed in EXPECTED_WARNINGS."""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest

from msa_sim.bmc import testing

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# the csdl/ folder of DMTF/Redfish-Publications 2025.4, beside the clone (the project carries no copy);
# REDFISH_CSDL names another place (a git worktree has no ../shared of its own)
CSDL = os.environ.get("REDFISH_CSDL") or os.path.normpath(os.path.join(ROOT, "..", "shared", "redfish-csdl"))
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


# Service validator warnings of a BMC with deprecated_resources true (the default, and the harness's setting), each
# for a client that reads only the deprecated form (test_ecosystem_clients.py fails without them)
# (resource, property as the validator names it): reason. Printed, and each must still occur (no stale entry).
# With deprecated_resources false there must be no warning at all.
_CG = "community.general's redfish_utils.py (tests/conformance/redfish_clients.yml)"
EXPECTED_WARNINGS = {
    ("/redfish/v1/Systems/1", "/IndicatorLED"): _CG + " PATCHes IndicatorLED for Systems IndicatorLedOn/Blink/Off "
                                                "and reads it first (check_pyld); it knows no LocationIndicatorActive",
    ("/redfish/v1/Chassis/1", "/IndicatorLED"): _CG + " PATCHes IndicatorLED for Chassis IndicatorLedOn/Blink/Off",
    ("/redfish/v1/Chassis/1", "/Power"): _CG + " reads power and PSUs (redfish_info Chassis) only from Chassis.Power, "
                                         "and so do msa.hpc.redfish_node (power_consumed_watts) and msa_sim.dcdb's "
                                         "Redfish plugin",
    ("/redfish/v1/Chassis/1/Power", "/@odata.id"): "the Power resource that link leads to (same clients)",
    ("/redfish/v1/Chassis/1", "/Thermal"): _CG + " reads fans and temperatures only from Chassis.Thermal",
    ("/redfish/v1/Chassis/1/Thermal", "/@odata.id"): "the Thermal resource that link leads to (same client)",
    ("/redfish/v1/Managers/BMC", "/VirtualMedia"): _CG + " looks for Manager VirtualMediaInsert/Eject media only "
                                                   "under the Manager; the link leads to the System's media",
}


def _tool(module):
    try:
        __import__(module)
    except ImportError:
        pytest.fail("%s is not installed: run `pip install -r requirements.txt` (it pins the DMTF tools)" % module)



def _say(text):
    """Print to the stderr of the moment (capture disabled): pytest-xdist (make unit) shows no worker's stdout."""
    print(text, file=sys.stderr)

@pytest.fixture(scope="module")
def bmc(tmp_path_factory):
    """A BMC as the harness configures them (roles/sim_bmc: deprecated_resources true)."""
    yield from _one_bmc(tmp_path_factory, "dmtf-bmc", True)


def _one_bmc(tmp_path_factory, name, deprecated):
    directory = str(tmp_path_factory.mktemp(name))
    ca, tls = testing.make_tls(directory)
    service = testing.start(directory, [{"name": "n1", "nics": [{"mac": "02:00:00:00:00:01", "ipv4": "10.0.0.1/24"}]}],
                            USERS, defaults={"tls": tls, "update_seconds": 0.2, "deprecated_resources": deprecated})
    yield {"url": service.url("n1"), "ca": ca, "dir": directory}
    service.stop()


def _table_counts(out, tool):
    """PASS, WARN, FAIL, NOT TESTED from the summary table the use case checkers and the service validator print."""
    table = re.search(r"PASS\s*\|\s*WARN\s*\|\s*FAIL\s*\|\s*NOT TESTED\s*\|\s*\n[+-]+\n\|\s*(\d+)\s*\|\s*(\d+)\s*\|"
                      r"\s*(\d+)\s*\|\s*(\d+)\s*\|", out)
    assert table, "%s printed no summary:\n%s" % (tool, out[-3000:])
    return tuple(int(n) for n in table.groups())


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
        _say("\nredfish-protocol-validator: PASS %d, WARN %d, FAIL %d, NOT_TESTED %d" % (
            passed, warned, failed, untested))
        for row in problems:
            _say("  %s %s %s %s: %s" % (row[4], row[0], row[1], row[3], row[5]))
        for prefix, reason in EXPECTED_NOT_TESTED.items():
            count = sum(1 for r in untested_rows if r[0].startswith(prefix))
            if count:
                _say("  NOT_TESTED %-40s x%d: %s" % (prefix, count, reason))
        for row in unexplained:
            _say("  NOT_TESTED (unexplained) %s %s: %s" % (row[0], row[3], row[5]))
    assert failed == 0, "the protocol validator failed %d assertions (listed above)" % failed
    assert passed >= 300, "only %d assertions passed: the validator did not reach the service" % passed
    assert not unexplained, "NOT_TESTED assertions without a stated reason: %s" % [r[0] for r in unexplained]


def test_redfish_use_case_checkers_find_no_failure(bmc, capsys):
    _tool("redfish_use_case_checkers")
    out = _run([os.path.join(HERE, "rucc_verified.py"), "--ca-bundle", bmc["ca"], "--rhost", bmc["url"], "-u",
                "admin", "-p", USERS["admin"][0], "--report-dir", os.path.join(bmc["dir"], "rucc")], bmc["dir"])
    passed, warned, failed, untested = _table_counts(out, "the use case checkers")
    logs = glob.glob(os.path.join(bmc["dir"], "rucc", "*", "*.log"))
    lines = []
    for path in logs:
        with open(path, encoding="utf-8") as handle:
            lines += handle.read().splitlines()
    with capsys.disabled():
        _say("\nredfish-use-case-checkers: PASS %d, WARN %d, FAIL %d, NOT TESTED %d" % (
            passed, warned, failed, untested))
        for index, line in enumerate(lines):
            if " - ERROR - " in line or " - WARNING - " in line:
                _say("  " + " | ".join(lines[max(0, index - 2):index + 1])[-400:])
        _say("  NOT TESTED: query parameters ($filter, $select, $expand, only) are not offered "
              "(ProtocolFeaturesSupported false); enabling an enabled account and clearing a password-change "
              "requirement nobody set are skipped by the tool; VLANs and IPv6 gateways do not exist here")
    assert failed == 0, "the use case checkers failed %d checks (ERROR lines above)" % failed
    assert passed >= 30, "only %d checks passed: the checkers did not reach the service" % passed


def _csdl_with_oem(directory):
    """The DMTF bundle and this BMC's own OEM schema (MsaBmc_v1.xml) in one folder, the bundle by symlink."""
    if not os.path.isfile(os.path.join(CSDL, "ServiceRoot_v1.xml")):
        pytest.fail("the DMTF CSDL schema bundle is not at %s: put the csdl/ folder of DMTF/Redfish-Publications "
                    "2025.4 there (../shared/redfish-csdl beside the clone; REDFISH_CSDL names another place)" % CSDL)
    schemas = os.path.join(directory, "csdl")
    os.makedirs(schemas)
    for name in os.listdir(CSDL):
        os.symlink(os.path.join(CSDL, name), os.path.join(schemas, name))
    oem = os.path.join(ROOT, "sim", "msa_sim", "bmc", "schema", "MsaBmc_v1.xml")
    os.symlink(oem, os.path.join(schemas, os.path.basename(oem)))
    return schemas


def _problems(log_lines):
    """(kind, resource, property, text) of every WARN and FAIL line, the resource from the line before it that
    says which one is being validated."""
    found, resource = [], None
    for line in log_lines:
        at = re.search(r" - INFO - Validating (\S+)\.\.\.$", line)
        if at:
            resource = at.group(1)
        hit = re.search(r" - (?:WARNING|ERROR) - (WARN|FAIL) - (\S+) (.*)$", line)
        if hit:
            found.append((hit.group(1), resource, hit.group(2), hit.group(3)))
    return found


def _service_validator(url, ca, directory, name):
    """Run the service validator against ``url``: (counts, problems) from its summary and its debug log."""
    logdir = os.path.join(directory, name)
    out = _run([os.path.join(HERE, "rsv_verified.py"), "--ca-bundle", ca, "--rhost", url, "-u",
                "admin", "-p", USERS["admin"][0], "--authtype", "Session", "--schema_directory",
                _csdl_with_oem(os.path.join(directory, name + "-schemas")), "--skipschema", "--logdir", logdir],
               directory)
    counts = _table_counts(out, "the service validator")
    lines = []
    for path in glob.glob(os.path.join(logdir, "*", "RedfishServiceValidatorDebug_*.log")):
        with open(path, encoding="utf-8") as handle:
            lines += handle.read().splitlines()
    return counts, _problems(lines)


def _report(label, counts, problems, expected):
    passed, warned, failed, untested = counts
    _say("\nredfish-service-validator (%s): PASS %d, WARN %d, FAIL %d, NOT TESTED %d" % (
        label, passed, warned, failed, untested))
    for kind, resource, prop, text in problems:
        reason = expected.get((resource, prop)) if kind == "WARN" else None
        _say("  %s %s %s %s%s" % (kind, resource, prop, text[:300], "\n      expected: " + reason if reason else ""))


@pytest.fixture(scope="module")
def current_only_bmc(tmp_path_factory):
    """A BMC with ``deprecated_resources: false``: the current forms only, as bmcweb built without its
    redfish-allow-deprecated-power-thermal option serves them."""
    yield from _one_bmc(tmp_path_factory, "dmtf-bmc-current", False)


def test_redfish_service_validator_finds_no_failure_and_no_warning(current_only_bmc, capsys):
    """With the deprecated forms off, the OpenBMC rule: no failure and no warning at all."""
    _tool("redfish_service_validator")
    counts, problems = _service_validator(current_only_bmc["url"], current_only_bmc["ca"], current_only_bmc["dir"],
                                          "rsv")
    with capsys.disabled():
        _report("deprecated_resources false", counts, problems, {})
    passed, warned, failed, _ = counts
    assert failed == 0, "the service validator failed %d checks (FAIL lines above)" % failed
    assert warned == 0 and not problems, "the service validator warned %d times (listed above)" % warned
    assert passed >= 1000, "only %d checks passed: the validator did not reach the service" % passed


def test_redfish_service_validator_warns_only_of_the_deprecated_forms_kept(bmc, capsys):
    """With the deprecated forms on (the default, and what the harness sets), no failure, and exactly the
    warnings EXPECTED_WARNINGS explains, each still occurring."""
    _tool("redfish_service_validator")
    counts, problems = _service_validator(bmc["url"], bmc["ca"], bmc["dir"], "rsv")
    passed, warned, failed, _ = counts
    unexpected = [p for p in problems if p[0] == "FAIL" or (p[1], p[2]) not in EXPECTED_WARNINGS]
    stale = [key for key in EXPECTED_WARNINGS if not any((p[1], p[2]) == key for p in problems)]
    with capsys.disabled():
        _report("deprecated_resources true", counts, problems, EXPECTED_WARNINGS)
    assert failed == 0, "the service validator failed %d checks (FAIL lines above)" % failed
    assert len([p for p in problems if p[0] == "WARN"]) == warned, "WARN lines in the log do not match the count"
    assert not unexpected, "service validator warnings nobody explained: %s" % unexpected
    assert not stale, "EXPECTED_WARNINGS lists warnings that no longer occur (remove them): %s" % stale
    assert passed >= 1000, "only %d checks passed: the validator did not reach the service" % passed
