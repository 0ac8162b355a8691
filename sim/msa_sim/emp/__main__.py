# SPDX-License-Identifier: GPL-3.0-or-later
"""`python3 -m msa_sim.emp master|slave|ctrl|trace ...`: one entry for the EMP stand-in's programs."""
from __future__ import annotations

import sys


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    programs = ("master", "slave", "ctrl", "trace")
    if not argv or argv[0] not in programs:
        print("usage: python3 -m msa_sim.emp {%s} ..." % ",".join(programs), file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    module = __import__("msa_sim.emp.%s" % name, fromlist=["main"])
    return module.main(rest)


if __name__ == "__main__":
    sys.exit(main())
