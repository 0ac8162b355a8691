# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module: power, boot override and inventory of one node through its Redfish BMC."""

DOCUMENTATION = r"""
---
module: redfish_node
short_description: Power a node on or off, set its boot override and read its inventory through Redfish
description:
  - Talks to a node's BMC over the DMTF Redfish API (C(/redfish/v1)), as in the hardware layer of seed 000.
  - Finds the BMC's computer system (the only one, or O(system_id)), brings it to the power O(state) with
    C(#ComputerSystem.Reset), honouring the reset types the BMC lists in C(ResetType@Redfish.AllowableValues),
    and waits until C(PowerState) says so.
  - Idempotent, O(state=on) on a node that is on, O(state=off) on a node that is off, or a boot override that
    is already set sends nothing. Restarts (V(graceful_restart), V(force_restart), V(power_cycle)) always act;
    on a node that is off they power it on.
  - The boot override is set before the power action, so one task can boot a node once from the network.
  - Check mode reads the BMC and reports what would be sent, without sending it.
version_added: "0.1.0"
author:
  - msa.hpc maintainers (@msa-hpc)
extends_documentation_fragment:
  - msa.hpc.attributes
  - msa.hpc.redfish
options:
  state:
    description:
      - Power state to reach. Omit it to change only the boot override or to read facts.
      - V(on) uses C(On); V(off) C(ForceOff); V(graceful_shutdown) C(GracefulShutdown) (the operating system
        shuts down); V(graceful_restart) C(GracefulRestart); V(force_restart) C(ForceRestart), or C(ForceOff)
        then C(On) where the BMC lacks it; V(power_cycle) C(PowerCycle), or C(ForceOff) then C(On).
    type: str
    choices: ["on", "off", graceful_shutdown, graceful_restart, force_restart, power_cycle]
  boot:
    description: Boot source override.
    type: dict
    suboptions:
      target:
        description:
          - C(BootSourceOverrideTarget), for example V(Pxe), V(Hdd), V(Cd), V(BiosSetup), V(UefiShell).
          - Must be one of the BMC's C(BootSourceOverrideTarget@Redfish.AllowableValues) (matched without
            regard to case). Required unless O(boot.mode=disabled).
        type: str
      mode:
        description:
          - V(once) boots from O(boot.target) at the next boot only (the BMC then returns to V(disabled));
            V(continuous) at every boot; V(disabled) removes the override.
        type: str
        choices: [once, continuous, disabled]
        default: once
  system_id:
    description: Id of the computer system, for BMCs that manage several. By default the BMC must manage one.
    type: str
  gather_facts:
    description: Return RV(inventory) (model, serial, CPUs, memory, NICs, power reading, health).
    type: bool
    default: false
    aliases: [inventory]
  wait:
    description: After a power action, wait until the system reports the requested C(PowerState).
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait for the power state (and, before acting, for a transition in progress).
    type: int
    default: 120
attributes:
  check_mode:
    support: full
    details: Reads the system and reports the reset types and boot changes it would send.
  diff_mode:
    support: full
    details: Shows the power state and boot override before and after.
notes:
  - The module runs where the BMC is reachable, usually the controller (with C(delegate_to) V(localhost)).
  - Retries with back-off on connection errors, timeouts and HTTP 5xx answers come from O(retries).
seealso:
  - module: community.general.redfish_command
  - name: DMTF Redfish
    description: The Redfish specification and schema.
    link: https://www.dmtf.org/standards/redfish
"""

EXAMPLES = r"""
- name: Make sure the node is powered on
  msa.hpc.redfish_node:
    endpoint: "https://{{ bmc_address }}"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
    ca_path: /etc/msa-hpc/bmc-ca.pem
    state: "on"
  delegate_to: localhost

- name: Boot the node once from the network and restart it now
  msa.hpc.redfish_node:
    endpoint: "https://{{ bmc_address }}"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
    boot:
      target: Pxe
      mode: once
    state: force_restart
  delegate_to: localhost

- name: Shut the node down cleanly, giving it five minutes
  msa.hpc.redfish_node:
    endpoint: "https://{{ bmc_address }}"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
    state: graceful_shutdown
    wait_timeout: 300
  delegate_to: localhost

- name: Read the inventory without changing anything
  msa.hpc.redfish_node:
    endpoint: "https://{{ bmc_address }}"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
    gather_facts: true
  delegate_to: localhost
  register: node_bmc
"""

RETURN = r"""
power_state_before:
  description: C(PowerState) of the system before the task.
  returned: always
  type: str
  sample: "Off"
power_state:
  description: C(PowerState) after the task (the expected one in check mode).
  returned: always
  type: str
  sample: "On"
reset_types:
  description: The C(ResetType) values sent (or that would be sent in check mode), in order.
  returned: always
  type: list
  elements: str
  sample: ["On"]
actions:
  description: Every change sent (or that would be sent), in order.
  returned: always
  type: list
  elements: str
  sample: ["PATCH Boot BootSourceOverrideEnabled=Once, BootSourceOverrideTarget=Pxe", "ComputerSystem.Reset On"]
boot_before:
  description: Boot source override before the task.
  returned: always
  type: dict
  sample: {"enabled": "Disabled", "target": "None", "mode": "UEFI", "allowed_targets": ["None", "Pxe", "Hdd"]}
boot:
  description:
    - Boot source override after the task. After a restart a one-time override has already been used, so
      C(enabled) reads C(Disabled) again.
  returned: always
  type: dict
  sample: {"enabled": "Once", "target": "Pxe", "mode": "UEFI", "allowed_targets": ["None", "Pxe", "Hdd"]}
system_id:
  description: Id of the computer system.
  returned: always
  type: str
  sample: "1"
system_uri:
  description: URI of the computer system.
  returned: always
  type: str
  sample: /redfish/v1/Systems/1
auth:
  description: Authentication used, V(session) or V(basic).
  returned: always
  type: str
  sample: session
inventory:
  description: Inventory facts of the system.
  returned: when O(gather_facts=true)
  type: dict
  contains:
    manufacturer: {description: Manufacturer., type: str, returned: always}
    model: {description: Model., type: str, returned: always}
    serial: {description: Serial number., type: str, returned: always}
    uuid: {description: System UUID., type: str, returned: always}
    power_state: {description: C(PowerState)., type: str, returned: always}
    health: {description: C(Status.HealthRollup) or C(Status.Health)., type: str, returned: always}
    cpus: {description: "C(count), C(model), C(cores), C(threads).", type: dict, returned: always}
    memory_gib: {description: Total system memory in GiB., type: float, returned: always}
    nics:
      description: Ethernet interfaces with C(id), C(name), C(mac), C(speed_mbps), C(link_status).
      type: list
      elements: dict
      returned: always
    power_consumed_watts:
      description: Chassis power reading in watts, or null when the BMC offers none.
      type: float
      returned: always
  sample: {"manufacturer": "MSA Simulated Systems", "model": "MSA-Node", "serial": "SIM-CM01",
           "power_state": "On", "health": "OK", "cpus": {"count": 2, "model": "Xeon", "cores": 16, "threads": 32},
           "memory_gib": 192, "nics": [{"id": "1", "mac": "02:00:0A:63:00:0B", "speed_mbps": 1000}],
           "power_consumed_watts": 182.5}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils._module_run import rest_failure, run_module
from ansible_collections.msa.hpc.plugins.module_utils._redfish import POWER_STATES, RedfishError, argument_spec, run
from ansible_collections.msa.hpc.plugins.module_utils._rest import RestError


def main():
    spec = argument_spec()
    spec.update(
        state=dict(type="str", choices=list(POWER_STATES)),
        boot=dict(type="dict", options=dict(
            target=dict(type="str"),
            mode=dict(type="str", default="once", choices=["once", "continuous", "disabled"]),
        )),
        system_id=dict(type="str"),
        gather_facts=dict(type="bool", default=False, aliases=["inventory"]),
        wait=dict(type="bool", default=True),
        wait_timeout=dict(type="int", default=120),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    bmc = "BMC at %s" % module.params["endpoint"]
    run_module(module, lambda: run(module.params, check_mode=module.check_mode),
               [(RedfishError, lambda exc: {"msg": "%s: %s" % (bmc, exc)}),
                (RestError, rest_failure("BMC", module.params["endpoint"]))])


if __name__ == "__main__":
    main()
