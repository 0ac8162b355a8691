# SPDX-License-Identifier: GPL-3.0-or-later
"""Mint the JWT Prometheus sends to slurmctld's /metrics (msa.hpc.prometheus; Slurm 26.05 on).

Slurm's own HS256 token: header {"alg": "HS256", "typ": "JWT"}, claims iat, exp and sun (the Slurm user name),
signed with the whole content of KEYFILE (src/plugins/auth/jwt/auth_jwt.c at slurm-26-05-3-1). The key is the one of
slurm.conf's SlurmctldHttpAuthParameters, which slurmctld checks only on its HTTP listener: a token made here opens
/metrics (and the /conf any user reads with scontrol), never slurmrestd nor Slurm's RPCs, which check AuthAlt's key.
The token file is replaced atomically, mode 0640, group GROUP (prometheus).

Usage: python3 -I slurm_metrics_token.py KEYFILE USER LIFESPAN_SECONDS OUTFILE [GROUP]
"""
import base64
import grp
import hashlib
import hmac
import json
import os
import re
import sys
import time

USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
MAX_LIFESPAN = 86400


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def mint(key, user, lifespan, now):
    """The compact JWS text of a Slurm HS256 token for ``user`` valid ``lifespan`` seconds from ``now``."""
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = b64url(json.dumps({"iat": now, "exp": now + lifespan, "sun": user}, separators=(",", ":")).encode())
    signature = b64url(hmac.new(key, header + b"." + claims, hashlib.sha256).digest())
    return (header + b"." + claims + b"." + signature).decode()


def main(argv):
    if len(argv) not in (5, 6):
        sys.stderr.write("usage: %s KEYFILE USER LIFESPAN_SECONDS OUTFILE [GROUP]\n" % argv[0])
        return 2
    keyfile, user, lifespan, outfile = argv[1:5]
    group = argv[5] if len(argv) == 6 else "prometheus"
    if not USER.match(user):
        sys.stderr.write("%s: user %r is not an account name\n" % (argv[0], user))
        return 2
    if not lifespan.isdigit() or not 60 <= int(lifespan) <= MAX_LIFESPAN:
        sys.stderr.write("%s: lifespan %r is not a number of seconds from 60 to %d\n" % (argv[0], lifespan, MAX_LIFESPAN))
        return 2
    try:
        gid = grp.getgrnam(group).gr_gid
        with open(keyfile, "rb") as handle:
            key = handle.read()
    except (KeyError, OSError) as exc:
        sys.stderr.write("%s: %s\n" % (argv[0], exc if isinstance(exc, OSError) else "no group %r" % group))
        return 1
    if len(key) < 32:
        sys.stderr.write("%s: the key in %s is shorter than 32 bytes\n" % (argv[0], keyfile))
        return 1
    token = mint(key, user, int(lifespan), int(time.time()))
    tmp = outfile + ".new"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchown(fd, -1, gid)
        os.fchmod(fd, 0o640)
        os.write(fd, (token + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, outfile)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
