# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Documentation of the slurmrestd options the msa.hpc Slurm modules share (endpoint, user, token, CA, timeout)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  rest_url:
    description: Base URL of slurmrestd (its TLS terminator), for example C(https://mgmt01:6820).
    type: str
  rest_user:
    description:
      - User sent as C(X-SLURM-USER-NAME); requests run as this user and the token must have been minted for it.
    type: str
  rest_token:
    description: JWT of O(rest_user) (C(scontrol token username=<rest_user> lifespan=<seconds>)); never printed.
    type: str
  rest_ca_path:
    description:
      - PEM file (or directory) of the CA certificates an C(https://) O(rest_url) is verified against, for example
        the system's CA C(/etc/msa-hpc/tls/ca.pem). Default is the system's trusted CAs.
    type: path
  rest_timeout:
    description: Seconds to wait for one slurmrestd request.
    type: int
    default: 10
"""
