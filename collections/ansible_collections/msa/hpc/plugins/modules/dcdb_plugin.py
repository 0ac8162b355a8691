# SPDX-License-Identifier: GPL-3.0-or-later
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

"""Ansible module: configure one DCDB Pusher plugin on a node (its /etc/dcdb/<plugin>.conf and the plugin list)."""

DOCUMENTATION = r"""
---
module: dcdb_plugin
short_description: Configure a DCDB Pusher plugin (sensor groups, sampling intervals, MQTT topics) on a node
description:
  - Writes the plugin's configuration file C(<config_dir>/<plugin>.conf) in DCDB's INFO format
    (C(group <name> { interval <ms> ... sensor <name> { ... } })) and adds the plugin to (or removes it from)
    the C(plugins) section of the Pusher's C(dcdbpusher.conf) (seed 004 section 6).
  - Validates before writing anything; errors name the field and the value. Checked are the plugin name,
    group and sensor names, the sampling interval (10 ms to 1 h), topic parts (C(mqttpart), C(mqttsuffix), as
    C(/level/...) without MQTT wildcards or empty levels), C(/proc) or C(/sys) paths of procfs and sysfs
    sensors, the procfs file type, the slurm method and the redfish BMC endpoint.
  - Reports C(changed) only when a file's content changes, and then C(reload_needed=true) so a handler
    reloads the Pusher (C(systemctl reload dcdbpusher), which sends SIGHUP) only when something changed.
  - Runs on the node itself; files are replaced atomically.
version_added: "0.1.0"
author:
  - msa.hpc maintainers (@msa-hpc)
extends_documentation_fragment:
  - msa.hpc.attributes
options:
  plugin:
    description:
      - Name of the Pusher plugin. The msa.hpc stand-in Pusher implements C(procfs), C(sysfs), C(slurm),
        C(redfish) and C(tester); the other names are DCDB plugins a site may configure for the vendor's Pusher.
    type: str
    required: true
    choices: [procfs, sysfs, slurm, redfish, tester, perfevent, ipmi, pdu, snmp, bacnet, gpfsmon, opa, msr,
              nvml, caliper]
  state:
    description:
      - V(present) writes the plugin file and lists the plugin in C(dcdbpusher.conf).
      - V(absent) removes both.
    type: str
    default: present
    choices: [present, absent]
  groups:
    description:
      - Sensor groups of the plugin, written in this order. Each is a mapping with C(name) (required; also the
        group's topic level unless C(mqttpart) is set), C(interval) (sampling interval in milliseconds,
        10 to 3600000, default 1000), C(mqttpart) (topic level(s) such as C(/cpu)), C(sensors) (a list of
        mappings with C(name) and attributes such as C(type), C(path), C(factor), C(delta), C(mqttsuffix)),
        and any other scalar group attribute of the plugin (C(type) and C(path) of a procfs group, C(method)
        and C(command) of a slurm group, C(endpoint), C(username), C(passwordFile), C(verifyTLS), C(caFile) of a redfish
        group, C(numSensors) of a tester group).
      - Required when O(state=present).
    type: list
    elements: dict
  global_options:
    description:
      - Scalar options of the plugin file's C(global) section (for example C(mqttPrefix), which replaces the
        Pusher's prefix for this plugin).
    type: dict
  pusher_global:
    description:
      - The Pusher's own C(global) section of O(pusher_config) (C(mqttBroker), C(mqttprefix), C(username),
        C(passwordFile), C(qosLevel), C(maxQueuedReadings), …), scalars in the order given. When set, the
        section is made exactly this, so a change of broker or queue limit reaches a configured node; when
        omitted, the section is left as it is.
    type: dict
  config_dir:
    description: Directory of the DCDB configuration files.
    type: path
    default: /etc/dcdb
  pusher_config:
    description:
      - The Pusher's main configuration file; its C(plugins) section is updated. Defaults to
        C(<config_dir>/dcdbpusher.conf). Comments in that file are not kept when the plugin list changes.
    type: path
  mode:
    description: Permissions of the files written.
    type: raw
    default: "0644"
notes:
  - Secrets (BMC passwords) do not belong in plugin files; name a C(passwordFile) readable by the Pusher instead.
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
seealso:
  - name: DCDB
    description: The Data Center Data Base monitoring framework.
    link: https://dcdb.it
"""

EXAMPLES = r"""
- name: Sample CPU, memory and load average every second
  msa.hpc.dcdb_plugin:
    plugin: procfs
    groups:
      - name: cpu
        interval: 1000
        type: stat
        sensors:
          - {name: util, type: utilization}
      - name: mem
        interval: 5000
        type: meminfo
        sensors:
          - {name: memfree, type: MemFree}
          - {name: memused, type: MemUsed}
      - name: load
        type: loadavg
        sensors:
          - {name: load1, type: load1}
  notify: Reload dcdbpusher

- name: Own the Pusher's global section too (broker, credentials, queue bound)
  msa.hpc.dcdb_plugin:
    plugin: procfs
    groups:
      - {name: load, type: loadavg, sensors: [{name: load1, type: load1}]}
    pusher_global:
      mqttBroker: broker.mgmt:1883
      mqttprefix: /deep-est/esb/esb01
      passwordFile: /etc/dcdb/pusher.secret
      maxQueuedReadings: 100000
  notify: Restart dcdbpusher

- name: Read thermal zones in degrees Celsius
  msa.hpc.dcdb_plugin:
    plugin: sysfs
    groups:
      - name: thermal
        interval: 2000
        sensors:
          - {name: temp, path: "/sys/class/thermal/thermal_zone*/temp", factor: 0.001}
  notify: Reload dcdbpusher

- name: Publish the Slurm jobs running on the node
  msa.hpc.dcdb_plugin:
    plugin: slurm
    groups:
      - {name: slurm, interval: 5000, method: listpids}
  notify: Reload dcdbpusher

- name: Stop reading the BMC
  msa.hpc.dcdb_plugin:
    plugin: redfish
    state: absent
  notify: Reload dcdbpusher
"""

RETURN = r"""
plugin_config:
  description: Path of the plugin's configuration file.
  returned: always
  type: str
  sample: /etc/dcdb/procfs.conf
plugins:
  description: Plugins listed in C(dcdbpusher.conf) afterwards.
  returned: always
  type: list
  elements: str
  sample: [procfs, slurm]
files_changed:
  description: Files written or removed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/dcdb/procfs.conf, /etc/dcdb/dcdbpusher.conf]
reload_needed:
  description: True when the Pusher must re-read its configuration (a file it reads changed).
  returned: always
  type: bool
  sample: true
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.msa.hpc.plugins.module_utils._module_run import run_module
from ansible_collections.msa.hpc.plugins.module_utils import _dcdb as D


def read_text(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def write_text(module, path, text, mode):
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    module.atomic_move(tmp, path)
    module.set_mode_if_different(path, mode, False)


def apply(module, params, check_mode):
    config_dir = params["config_dir"]
    pusher_conf = params["pusher_config"] or os.path.join(config_dir, "dcdbpusher.conf")
    changes, plugins = D.plan_plugin(params["plugin"], params["state"], params["groups"] or [],
                                     params["global_options"], config_dir, pusher_conf, read_text,
                                     params["pusher_global"])
    diffs = [{"before_header": path, "after_header": path, "before": before or "", "after": after or ""}
             for path, (before, after) in changes.items()]
    if not check_mode:
        for path, (before, after) in changes.items():
            if after is None:
                os.remove(path)
            else:
                write_text(module, path, after, params["mode"])
    return {"changed": bool(changes), "reload_needed": bool(changes),
            "plugin_config": os.path.join(config_dir, "%s.conf" % params["plugin"]),
            "plugins": plugins, "files_changed": sorted(changes), "diff": diffs}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            plugin=dict(type="str", required=True, choices=list(D.PLUGINS_KNOWN)),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            groups=dict(type="list", elements="dict"),
            global_options=dict(type="dict"),
            pusher_global=dict(type="dict"),
            config_dir=dict(type="path", default=D.DEFAULT_CONFIG_DIR),
            pusher_config=dict(type="path"),
            mode=dict(type="raw", default="0644"),
        ),
        required_if=[("state", "present", ("groups",))],
        supports_check_mode=True,
    )
    run_module(module, lambda: apply(module, module.params, module.check_mode), [
        (D.InfoError, lambda exc: {"msg": "cannot parse %s line %d: %s" % (exc.source, exc.line, exc),
                                   "file": exc.source, "line": exc.line}),
        (D.DcdbConfigError, lambda exc: {"msg": "plugin %s: %s" % (module.params["plugin"], exc)}),
        (OSError, lambda exc: {"msg": "cannot write the DCDB configuration: %s: %s" % (exc.filename, exc.strerror)}),
    ])


if __name__ == "__main__":
    main()
