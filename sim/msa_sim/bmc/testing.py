# SPDX-License-Identifier: GPL-3.0-or-later
"""Run BMCs in-process on 127.0.0.1 with ephemeral ports and the file backend (for tests and demos), over TLS from
a throwaway CA when asked."""
from __future__ import annotations

import json
import os
import subprocess

from msa_sim.bmc import auth, config
from msa_sim.bmc.api import BmcService

FAST_ITERATIONS = 2000  # tests only; the CLI's hash-password defaults to auth.DEFAULT_ITERATIONS


def make_tls(directory, addresses=("127.0.0.1",)):
    """A throwaway CA and a server certificate for ``addresses`` (openssl); returns (ca.pem, {cert, key})."""
    tls = os.path.join(directory, "tls")
    os.makedirs(tls, exist_ok=True)
    ca_key, ca, key, csr, cert = (os.path.join(tls, n) for n in ("ca.key", "ca.pem", "bmc.key", "bmc.csr",
                                                                 "bmc.crt"))
    ext = os.path.join(tls, "ext.cnf")
    with open(ext, "w", encoding="utf-8") as handle:
        handle.write("subjectAltName=%s\nextendedKeyUsage=serverAuth\nbasicConstraints=critical,CA:FALSE\n"
                     "keyUsage=critical,digitalSignature\n" % ",".join("IP:" + a for a in addresses))

    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True)

    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", ca_key,
        "-out", ca, "-days", "2", "-subj", "/CN=msa-bmc test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr,
        "-subj", "/CN=msa-bmc test")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "2",
        "-extfile", ext)
    return ca, {"cert": cert, "key": key}


def make_config(directory, bmcs, users, graceful_delay=0.0, **service):
    """A validated configuration: ``users`` maps user name to (password, role)."""
    accounts = [{"username": name, "password_hash": auth.hash_password(password, iterations=FAST_ITERATIONS),
                 "role": role} for name, (password, role) in users.items()]
    data = {"database": os.path.join(directory, "bmc.sqlite"),
            "backend": {"type": "file", "state_file": os.path.join(directory, "power.json"),
                        "graceful_delay": graceful_delay},
            "defaults": {"address": "127.0.0.1", "port": 0, "users": accounts},
            "bmcs": bmcs}
    defaults = service.pop("defaults", {})
    data["defaults"].update(defaults)
    data.update(service)
    path = os.path.join(directory, "bmcs.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
    return config.load(path)


def start(directory, bmcs, users, graceful_delay=0.0, log=None, **service):
    return BmcService(make_config(directory, bmcs, users, graceful_delay, **service), log=log).start()
