# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Options every module that talks to a manager's REST API shares (endpoint, credentials, TLS, timeout)."""


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  endpoint:
    description:
      - Base URL of the manager's REST API, for example C(https://mgmt01:8780) for the NAM/GCE manager.
    type: str
    required: true
  username:
    description:
      - User the manager knows (for the NAM/GCE manager, a line of C(/etc/nam-manager/users.conf)).
      - Sent with HTTP basic authentication. Required together with O(password).
    type: str
  password:
    description:
      - Password of O(username).
    type: str
  token:
    description:
      - Bearer token instead of O(username) and O(password) (for the NAM/GCE manager, from C(POST /auth/token)).
    type: str
  validate_certs:
    description:
      - Verify the manager's TLS certificate when O(endpoint) is C(https://).
      - Turning this off is for tests only; the managers speak TLS only and their certificates come from the
        system's CA, given with O(ca_path).
    type: bool
    default: true
  ca_path:
    description:
      - PEM file (or directory) of the CA certificates the manager's certificate is verified against, for example
        the system's CA C(/etc/msa-hpc/tls/ca.pem). Default is the system's trusted CAs.
    type: path
  timeout:
    description:
      - Seconds to wait for one HTTP request. A request that did not reach the manager is retried three times with
        back-off; an allocation or communicator whose answer was lost is looked up by its name before it is asked
        for again, so it is never made twice.
    type: int
    default: 10
notes:
  - The credentials need the C(admin) role to act for another owner, to allocate from the administrator reserve
    or to touch allocations and communicators of other users.
"""
