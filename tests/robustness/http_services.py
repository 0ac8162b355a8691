# SPDX-License-Identifier: GPL-3.0-or-later
"""Every HTTP service of the product and the stand-ins, each started as a process of its own over TLS on 127.0.0.1
(as systemd starts it on a node), with its credentials and the requests the robustness test needs of it."""
from __future__ import annotations

import base64
import hashlib
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import types

from ansible_collections.msa.hpc.plugins.module_utils import _overlay_store
from msa_sim.bmc import testing as bmc_testing
from msa_sim.nammgr.auth import hash_password
from msa_sim.rma import capability

BUNDLE = pathlib.Path(__file__).resolve().parents[2]
STORE = BUNDLE / "collections/ansible_collections/msa/hpc/roles/udocker/files/msa_image_store.py"
NODE_UTILS = BUNDLE / "collections/ansible_collections/msa/hpc/plugins/module_utils/node"
TOKEN = "robust-token-0123456789"
PASSWORD = "robust-pw"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


def _env(pythonpath):
    return dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in pythonpath))


def _spawn(name, argv, workdir, port, pythonpath=(BUNDLE / "sim", BUNDLE / "collections"), timeout=30):
    log = open(os.path.join(workdir, name + ".log"), "ab")  # pylint: disable=consider-using-with
    proc = subprocess.Popen(argv, env=_env(pythonpath), stdout=log, stderr=log, cwd=workdir)
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise RuntimeError("%s did not start: %s" % (name, pathlib.Path(log.name).read_text()[-2000:]))
        time.sleep(0.05)
    return proc, log


def _nammgr(workdir, pki):
    users = workdir / "users.conf"
    users.write_text("admin:admin:%s\n" % hash_password(PASSWORD, iterations=1000))
    (workdir / "state").mkdir()
    conf = workdir / "manager.conf"
    conf.write_text("[manager]\nlisten = 127.0.0.1\nstate_dir = %s\nusers_file = %s\ntls_cert = %s\ntls_key = %s\n"
                    "[nam:nam01]\ncapacity = 64M\n" % (workdir / "state", users, pki["cert"], pki["key"]))
    port = free_port()
    argv = [sys.executable, "-m", "msa_sim.nammgr", "serve", "--config", str(conf), "--port", str(port),
            "--log-level", "WARNING"]
    auth = {"Authorization": basic("admin", PASSWORD)}
    return argv, port, auth, ("GET", "/nam/devices"), ("POST", "/nam/allocations")


def _rma(workdir, pki):
    key_file = str(workdir / "device.key")
    key = capability.load_key(key_file, create=True)
    token = capability.sign(key, {"kind": "nam", "device": "nam01", "alloc": 1, "address": 0, "size": 4096,
                                  "created": time.time(), "volatile": True}, 3600)
    port = free_port()
    argv = [sys.executable, "-m", "msa_sim.rma", "serve", "--kind", "nam", "--device", "nam01", "--listen",
            "127.0.0.1", "--port", str(port), "--key-file", key_file, "--tls-cert", pki["cert"], "--tls-key",
            pki["key"], "--state-dir", str(workdir / "state"), "--volatile-dir", str(workdir / "volatile"),
            "--capacity", "1M", "--log-level", "WARNING"]
    auth = {"Authorization": "Capability " + token}
    return argv, port, auth, ("GET", "/v1/nam/1?offset=0&length=64"), ("PUT", "/v1/nam/1?offset=0")


def _emp(workdir, pki):
    (workdir / "token").write_text(TOKEN)
    port = free_port()
    conf = workdir / "master.conf"
    conf.write_text("listen_address = 127.0.0.1\nlisten_port = %d\nstate_dir = %s\ntoken_file = %s\ntls_cert = %s\n"
                    "tls_key = %s\nsweep_interval = 0\nsensor_dir = \n" % (port, workdir, workdir / "token",
                                                                           pki["cert"], pki["key"]))
    argv = [sys.executable, "-m", "msa_sim.emp.master", "-c", str(conf)]
    return argv, port, {"Authorization": "Bearer " + TOKEN}, ("GET", "/emp/status"), ("POST", "/slaves/report")


def _dcdb(workdir, pki):
    port = free_port()
    conf = workdir / "collectagent.conf"
    conf.write_text("global {\n mqttBroker 127.0.0.1:%d\n sacct none\n}\nstorage {\n path %s/dcdb.sqlite\n}\n"
                    "restAPI {\n address 127.0.0.1:%d\n certificate %s\n privateKey %s\n user grafana {\n"
                    "  password %s\n }\n}\n" % (free_port(), workdir, port, pki["cert"], pki["key"], PASSWORD))
    argv = [sys.executable, "-m", "msa_sim.dcdb.collectagent", "-c", str(conf)]
    return argv, port, {"Authorization": basic("grafana", PASSWORD)}, ("GET", "/status"), ("POST", "/query")


def _psgw(workdir, pki):
    (workdir / "token").write_text(TOKEN)
    port = free_port()
    argv = [sys.executable, "-m", "msa_sim.psgwd.agent", "--listen", "127.0.0.1:%d" % port, "--name", "gw01",
            "--fabric", "ib=127.0.0.1", "--fabric", "extoll=127.0.0.1",
            "--token-file", str(workdir / "token"), "--tls-cert", pki["cert"], "--tls-key", pki["key"],
            "--state-dir", str(workdir / "state"), "--run-dir", str(workdir / "run")]
    return argv, port, {"Authorization": "Bearer " + TOKEN}, ("GET", "/v1/jobs"), ("POST", "/v1/jobs")


def _bmc(workdir, pki):
    port = free_port()
    users = {"ops": (PASSWORD, "Operator")}
    bmc_testing.make_config(str(workdir), [{"name": "n1"}], users,
                            defaults={"tls": {"cert": pki["cert"], "key": pki["key"]}, "port": port})
    argv = [sys.executable, "-m", "msa_sim.bmc", "serve", "--config", str(workdir / "bmcs.json"), "--quiet"]
    return (argv, port, {"Authorization": basic("ops", PASSWORD)}, ("GET", "/redfish/v1/Systems/1"),
            ("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"))


def _image_store(workdir, pki):
    (workdir / "store").mkdir()
    (workdir / "store" / "SHA256SUMS").write_text("0" * 64 + "  demo_1.tar\n")
    (workdir / "password").write_text(PASSWORD)
    port = free_port()
    argv = [sys.executable, "-I", str(STORE), "--bind", "127.0.0.1", "--port", str(port), "--directory",
            str(workdir / "store"), "--cert", pki["cert"], "--key", pki["key"], "--password-file",
            str(workdir / "password")]
    # as on a node: tlsserver.py beside the program (python3 -I puts the program's own folder on the path)
    (workdir / "bin").mkdir()
    shutil.copy(STORE, workdir / "bin" / STORE.name)
    shutil.copy(NODE_UTILS / "tlsserver.py", workdir / "bin" / "tlsserver.py")
    argv[2] = str(workdir / "bin" / STORE.name)
    return argv, port, {"Authorization": basic("images", PASSWORD)}, ("GET", "/SHA256SUMS"), ("POST", "/SHA256SUMS")


def _overlay_server(workdir, pki):
    """msa-overlay-server (msa.hpc.node_overlay) with one node's overlay and that node's token."""
    (workdir / "store").mkdir()
    _overlay_store.publish(str(workdir / "store"), _overlay_store.decode_request(
        {"n1": [{"dest": "/etc/msa-hpc/node.json", "content": '{"name": "n1"}'}]}))
    (workdir / "tokens").write_text("n1 %s\n" % hashlib.sha256(TOKEN.encode()).hexdigest())
    port = free_port()
    argv = [sys.executable, "-c", "import sys; from ansible_collections.msa.hpc.plugins.module_utils.node."
            "overlay_server import main; sys.exit(main())", "--bind", "127.0.0.1", "--port", str(port),
            "--store", str(workdir / "store"), "--tokens", str(workdir / "tokens"), "--cert", pki["cert"],
            "--key", pki["key"]]
    return argv, port, {"Authorization": "Bearer " + TOKEN}, ("GET", "/v1/overlay/n1"), ("POST", "/v1/overlay/n1")


STARTERS = {"bmc": _bmc, "dcdb": _dcdb, "emp": _emp, "image-store": _image_store, "nammgr": _nammgr,
            "overlay-server": _overlay_server, "psgw-agent": _psgw, "rma": _rma}


def start(name, workdir, pki):
    """Service ``name`` running: a namespace with pid, port, auth (headers), good and body (method, path)."""
    workdir = pathlib.Path(workdir)
    argv, port, auth, good, body = STARTERS[name](workdir, pki)
    proc, log = _spawn(name, argv, str(workdir), port)
    return types.SimpleNamespace(name=name, proc=proc, log=log, port=port, auth=auth, good=good, body=body)


def stop(service):
    if service.proc.poll() is None:
        service.proc.send_signal(signal.SIGTERM)
        try:
            service.proc.wait(10)
        except subprocess.TimeoutExpired:
            service.proc.kill()
            service.proc.wait()
    service.log.close()


def peak_memory(pid):
    """VmHWM (peak resident set) and VmRSS of process ``pid``, in KiB."""
    values = {}
    with open("/proc/%d/status" % pid, encoding="ascii") as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                values[key] = int(rest.split()[0])
    return values["VmHWM"], values["VmRSS"]
