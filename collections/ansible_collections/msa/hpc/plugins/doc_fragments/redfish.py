# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Documentation of the options every msa.hpc Redfish module shares (endpoint, credentials, TLS, retries)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  endpoint:
    description:
      - Base URL of the BMC, for example C(https://10.99.0.11) or C(http://10.99.0.11:8000).
      - The service root C(/redfish/v1/) is found below it.
    type: str
    required: true
    aliases: [baseuri]
  username:
    description: BMC account name.
    type: str
    required: true
    aliases: [user]
  password:
    description: Password of O(username). Never logged.
    type: str
    required: true
  auth:
    description:
      - V(session) logs in through the SessionService (C(POST .../Sessions), C(X-Auth-Token)) and deletes the
        session at the end, also when the task fails. A BMC without a SessionService is then used with basic
        authentication, with a warning.
      - V(basic) sends the credentials with every request.
    type: str
    choices: [session, basic]
    default: session
  validate_certs:
    description: Verify the BMC's TLS certificate. Turn off only for lab BMCs with self-signed certificates.
    type: bool
    default: true
  ca_path:
    description: PEM file of the CA that signed the BMC's certificate.
    type: path
  timeout:
    description: Seconds for one HTTP request.
    type: int
    default: 10
  retries:
    description:
      - Extra attempts, with exponential back-off (0.5 s, 1 s, 2 s, ...), after a connection that failed before the
        request was sent, an HTTP 502, 503 or 504 answer to a GET, or a GET whose answer was lost (a timeout, a
        dropped connection).
      - A reset or boot change whose answer was lost is sent again only when the system shows it did not happen
        (PowerState for on/off, LastResetTime for restarts); when that cannot be told the task fails and says so
        rather than restart a node twice.
    type: int
    default: 3
"""
