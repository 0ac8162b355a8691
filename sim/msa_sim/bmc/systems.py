# SPDX-License-Identifier: GPL-3.0-or-later
"""The ComputerSystem of one BMC and what hangs off it: reset, boot override, NICs, CPUs, memory, BIOS, storage."""
from __future__ import annotations

import json
import re

from msa_sim.bmc import resource as R
from msa_sim.bmc.backend import BackendError
from msa_sim.bmc.bios import BiosMixin
from msa_sim.bmc.boot_image import boot_image
from msa_sim.bmc.chassis import ChassisMixin, led_setting
from msa_sim.bmc.inventory import InventoryMixin
from msa_sim.bmc.power import PowerMixin
from msa_sim.bmc.resource import Fail, Response

BOOT_ENABLED = ("Disabled", "Once", "Continuous")
BOOT_MODES = ("UEFI", "Legacy")
RESTORE_POLICIES = ("AlwaysOn", "AlwaysOff", "LastState")
# what an account with only the OEM privilege MsaBootOverride may PATCH: the one-time image boot, or its removal
BOOT_OVERRIDE_ONLY = {"BootSourceOverrideEnabled": ("Once", "Disabled"),
                      "BootSourceOverrideTarget": ("UefiHttp", "None"), "HttpBootUri": None}


class SystemsMixin(PowerMixin, ChassisMixin, InventoryMixin, BiosMixin):
    """ComputerSystem resources; writable settings without a column of their own are ``settings()`` (persisted)."""

    def settings(self):
        return json.loads(self.store.system(self.name)["settings"] or "{}")

    def save_settings(self, **values):
        with self._observe_lock:
            current = self.settings()
            current.update(values)
            self.store.update_system(self.name, settings=json.dumps(current, sort_keys=True))

    def __init__(self):
        PowerMixin.__init__(self)
        ChassisMixin.__init__(self)
        InventoryMixin.__init__(self)

    def system_routes(self):
        s, c, m = (re.escape(p) for p in (self.sys_path, self.chassis_path, self.manager_path))
        root = re.escape(R.ROOT)
        return [
            (root + r"/Systems", {"GET": (self.get_systems, "Login")}),
            (s, {"GET": (self.get_system, "Login"),
                 "PATCH": (self.patch_system, ("ConfigureComponents", "MsaBootOverride"))}),
            (s + r"/Actions/ComputerSystem\.Reset", {
                "POST": (self.post_reset, ("ConfigureComponents", "OperateSystems"))}),
            (s + r"/ResetActionInfo", {"GET": (self.get_reset_info, "Login")}),
            (s + r"/EthernetInterfaces", {"GET": (self.get_nics, "Login")}),
            (s + r"/EthernetInterfaces/(?P<nic>[^/]+)", {"GET": (self.get_nic, "Login")}),
            (s + r"/Processors", {"GET": (self.get_processors, "Login")}),
            (s + r"/Processors/(?P<cpu>[^/]+)", {"GET": (self.get_processor, "Login")}),
            (s + r"/Memory", {"GET": (self.get_memories, "Login")}),
            (s + r"/Memory/(?P<dimm>[^/]+)", {"GET": (self.get_memory, "Login")}),
        ] + self.chassis_routes(c) + self.manager_routes(m) + self.inventory_routes() + self.bios_routes()

    def get_systems(self, **_):
        return Response(200, R.collection("ComputerSystemCollection", R.ROOT + "/Systems", "Computer System Collection",
                                         [self.sys_path]))

    def system_body(self):
        conf, row = self.conf, self.store.system(self.name)
        try:
            state = self.power_state()
            health = row["health"]
            status = {"State": "Enabled" if state == "On" else "StandbyOffline", "Health": health,
                      "HealthRollup": health}
            oem_error = None
        except BackendError as exc:
            self.last_error = oem_error = str(exc)
            state, status = "Off", {"State": "UnavailableOffline", "Health": "Critical", "HealthRollup": "Critical"}
        row = self.store.system(self.name)
        cpus = conf["cpus"]
        body = {
            "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem", "@odata.id": self.sys_path,
            "Id": conf["system_id"], "Name": conf["hostname"], "SystemType": "Physical",
            "Manufacturer": conf["manufacturer"], "Model": conf["model"], "SerialNumber": conf["serial"],
            "SKU": conf["sku"], "UUID": conf["uuid"], "HostName": conf["hostname"],
            "BiosVersion": self.firmware_versions()["BIOS"], "PowerState": state, "Status": status,
            "Boot": {"BootSourceOverrideEnabled": row["boot_enabled"],
                     "BootSourceOverrideEnabled@Redfish.AllowableValues": list(BOOT_ENABLED),
                     "BootSourceOverrideTarget": row["boot_target"],
                     "BootSourceOverrideTarget@Redfish.AllowableValues": list(conf["boot_targets"]),
                     "BootSourceOverrideMode": row["boot_mode"],
                     "BootSourceOverrideMode@Redfish.AllowableValues": list(BOOT_MODES),
                     "HttpBootUri": self.settings().get("http_boot_uri") or "",
                     "BootOrder": list(self.settings().get("boot_order") or list(self.boot_options())),
                     "BootOptions": R.link(self.sys_path + "/BootOptions")},
            "PowerRestorePolicy": self.settings().get("PowerRestorePolicy", "LastState"),
            "AssetTag": self.settings().get("AssetTag", ""),
            "LocationIndicatorActive": self.settings().get("IndicatorLED", "Off") != "Off",
            "Bios": R.link(self.sys_path + "/Bios"),
            "Storage": R.link(self.sys_path + "/Storage"), "SecureBoot": R.link(self.sys_path + "/SecureBoot"),
            "VirtualMedia": R.link(self.sys_path + "/VirtualMedia"),
            "ProcessorSummary": {"Count": cpus["count"], "CoreCount": cpus["count"] * cpus["cores"],
                                 "LogicalProcessorCount": cpus["count"] * cpus["threads"], "Model": cpus["model"]},
            "MemorySummary": {"TotalSystemMemoryGiB": conf["memory_gib"]},
            "Processors": R.link(self.sys_path + "/Processors"), "Memory": R.link(self.sys_path + "/Memory"),
            "EthernetInterfaces": R.link(self.sys_path + "/EthernetInterfaces"),
            "Links": {"Chassis": [R.link(self.chassis_path)], "ManagedBy": [R.link(self.manager_path)]},
            "Actions": {"#ComputerSystem.Reset": {
                "target": self.sys_path + "/Actions/ComputerSystem.Reset",
                "ResetType@Redfish.AllowableValues": list(conf["reset_types"]),
                "@Redfish.ActionInfo": self.sys_path + "/ResetActionInfo"},
                "#ComputerSystem.SetDefaultBootOrder": {
                    "target": self.sys_path + "/Actions/ComputerSystem.SetDefaultBootOrder"}},
            "Oem": {"MsaBmc": {"@odata.type": "#MsaBmc.v1_0_0.ComputerSystem",  # schema/MsaBmc_v1.xml
                               "Container": conf["container"], "Boots": row["boots"],
                               "LastBootSourceOverrideTarget": row["last_boot_target"],
                               "BootImage": self.settings().get("boot_image"), "BackendError": oem_error}},
        }
        if conf["deprecated_resources"]:
            body["IndicatorLED"] = self.settings().get("IndicatorLED", "Off")
        if row["last_reset"] is not None:  # unknown until the BMC sees a boot: omitted (the schema allows no null)
            body["LastResetTime"] = R.iso(row["last_reset"])
        return body

    def get_system(self, **_):
        return Response(200, self.system_body())

    def patch_system(self, data, who=None, **_):
        if who is not None and "ConfigureComponents" not in who.privileges:
            self._check_boot_override_only(data)
        writable = ("Boot", "PowerRestorePolicy", "AssetTag", "LocationIndicatorActive") + (
            ("IndicatorLED",) if self.conf["deprecated_resources"] else ())
        for key in data:
            if key not in writable:
                raise R.not_writable(key) if key in self.system_body() else R.unknown_property(key)
        if "PowerRestorePolicy" in data and data["PowerRestorePolicy"] not in RESTORE_POLICIES:
            raise R.value_not_in_list(data["PowerRestorePolicy"], "PowerRestorePolicy", RESTORE_POLICIES)
        led = led_setting(data)
        if "AssetTag" in data and not isinstance(data["AssetTag"], str):
            raise R.type_error(data["AssetTag"], "AssetTag")
        boot = data.get("Boot") or {}
        if not isinstance(boot, dict):
            raise Fail(400, "PropertyValueTypeError", "The value for the property Boot must be an object.")
        allowed = {"BootSourceOverrideEnabled": BOOT_ENABLED, "BootSourceOverrideTarget": self.conf["boot_targets"],
                   "BootSourceOverrideMode": BOOT_MODES}
        boot = dict(boot)
        http_boot_uri = boot.pop("HttpBootUri", None)
        if http_boot_uri:  # null or "" clears it
            boot_image(http_boot_uri, self.conf["boot_image_pattern"])
        for key, value in boot.items():
            if key == "BootOrder":
                continue
            if key not in allowed:
                raise Fail(400, "PropertyUnknown", "The property Boot/%s is not known or not writable." % key,
                           args=[key])
            if value not in allowed[key]:
                raise Fail(400, "PropertyValueNotInList", "The value '%s' for the property %s is not in the list "
                           "of acceptable values (%s)." % (value, key, ", ".join(allowed[key])),
                           "Choose a value from the enumeration list that the implementation can support and "
                           "resubmit the request if the operation failed.", args=[value, key])
        columns = {"BootSourceOverrideEnabled": "boot_enabled", "BootSourceOverrideTarget": "boot_target",
                   "BootSourceOverrideMode": "boot_mode"}
        if "BootOrder" in boot:
            order = boot.pop("BootOrder")
            if not isinstance(order, list) or sorted(order) != sorted(list(self.boot_options())):
                raise Fail(400, "PropertyValueIncorrect", "BootOrder must list each of %s once."
                           % ", ".join(list(self.boot_options())), args=[order, "BootOrder"])
            self.save_settings(boot_order=order)
        if "HttpBootUri" in data.get("Boot", {}):
            self.save_settings(http_boot_uri=http_boot_uri or "")
        self.save_settings(**{k: data[k] for k in ("PowerRestorePolicy", "AssetTag") if k in data})
        if led:
            self.save_settings(IndicatorLED=led)
        if boot:
            self.store.update_system(self.name, **{columns[k]: v for k, v in boot.items()})
        return Response(200, self.system_body())

    def _check_boot_override_only(self, data):
        """An account with MsaBootOverride but not ConfigureComponents may set the one-time image boot, no more."""
        boot = data.get("Boot")
        if set(data) != {"Boot"} or not isinstance(boot, dict) or not boot:
            raise R.forbidden()
        for key, value in boot.items():
            if key not in BOOT_OVERRIDE_ONLY or (BOOT_OVERRIDE_ONLY[key] and value not in BOOT_OVERRIDE_ONLY[key]):
                raise Fail(403, "InsufficientPrivilege", "Boot/%s=%r needs ConfigureComponents; this account may "
                           "only set a one-time UefiHttp boot and its HttpBootUri." % (key, value),
                           "Use an account with ConfigureComponents.", args=["Boot/" + key])

    def post_reset(self, data, **_):
        reset_type = data.get("ResetType")
        if reset_type is None:
            raise Fail(400, "ActionParameterMissing", "The action ComputerSystem.Reset requires the parameter "
                       "ResetType to be present in the request body.", args=["ComputerSystem.Reset", "ResetType"])
        self.reset(reset_type)
        return Response(204)

    def get_reset_info(self, **_):
        return Response(200, {"@odata.type": "#ActionInfo.v1_3_0.ActionInfo",
                              "@odata.id": self.sys_path + "/ResetActionInfo", "Id": "ResetActionInfo",
                              "Name": "Reset Action Info", "Parameters": [{
                                  "Name": "ResetType", "Required": True, "DataType": "String",
                                  "AllowableValues": list(self.conf["reset_types"])}]})

    def _nic(self, nic, on):
        body = {"@odata.type": "#EthernetInterface.v1_9_0.EthernetInterface",
                "@odata.id": "%s/EthernetInterfaces/%s" % (self.sys_path, nic["id"]), "Id": nic["id"],
                "Name": nic["name"], "MACAddress": nic["mac"], "PermanentMACAddress": nic["mac"],
                "SpeedMbps": nic["speed_mbps"], "InterfaceEnabled": True,
                "LinkStatus": "LinkUp" if on else "LinkDown", "Status": {"State": "Enabled", "Health": "OK"}}
        if nic.get("ipv4"):
            address, _, prefix = str(nic["ipv4"]).partition("/")
            body["IPv4Addresses"] = [{"Address": address, "AddressOrigin": "Static",
                                      "SubnetMask": _mask(int(prefix or 24))}]
        return body

    def _find(self, items, key, value, kind):
        for item in items:
            if item[key] == value:
                return item
        raise Fail(404, "ResourceMissingAtURI", "There is no %s %s on this system." % (kind, value), args=[value])

    def get_nics(self, **_):
        return Response(200, R.collection("EthernetInterfaceCollection", self.sys_path + "/EthernetInterfaces",
                                         "Ethernet Interface Collection",
                                         ["%s/EthernetInterfaces/%s" % (self.sys_path, n["id"])
                                          for n in self.conf["nics"]]))

    def get_nic(self, nic, **_):
        found = self._find(self.conf["nics"], "id", nic, "Ethernet interface")
        return Response(200, self._nic(found, self.power_state() == "On"))

    def _cpus(self):
        return ["CPU%d" % (i + 1) for i in range(self.conf["cpus"]["count"])]

    def get_processors(self, **_):
        return Response(200, R.collection("ProcessorCollection", self.sys_path + "/Processors", "Processors Collection",
                                         ["%s/Processors/%s" % (self.sys_path, c) for c in self._cpus()]))

    def get_processor(self, cpu, **_):
        if cpu not in self._cpus():
            raise Fail(404, "ResourceMissingAtURI", "There is no processor %s on this system." % cpu, args=[cpu])
        cpus = self.conf["cpus"]
        return Response(200, {"@odata.type": "#Processor.v1_18_0.Processor",
                              "@odata.id": "%s/Processors/%s" % (self.sys_path, cpu), "Id": cpu, "Name": cpu,
                              "Socket": cpu, "ProcessorType": "CPU", "ProcessorArchitecture": "x86",
                              "InstructionSet": "x86-64", "Model": cpus["model"], "MaxSpeedMHz": cpus["speed_mhz"],
                              "TotalCores": cpus["cores"], "TotalThreads": cpus["threads"],
                              "Status": {"State": "Enabled", "Health": "OK"}})

    def _dimms(self):
        return ["DIMM%d" % (i + 1) for i in range(self.conf["dimms"])]

    def get_memories(self, **_):
        return Response(200, R.collection("MemoryCollection", self.sys_path + "/Memory", "Memory Module Collection",
                                         ["%s/Memory/%s" % (self.sys_path, d) for d in self._dimms()]))

    def get_memory(self, dimm, **_):
        if dimm not in self._dimms():
            raise Fail(404, "ResourceMissingAtURI", "There is no memory module %s on this system." % dimm, args=[dimm])
        return Response(200, {"@odata.type": "#Memory.v1_17_0.Memory",
                              "@odata.id": "%s/Memory/%s" % (self.sys_path, dimm), "Id": dimm, "Name": dimm,
                              "CapacityMiB": self.conf["memory_gib"] * 1024 // self.conf["dimms"],
                              "MemoryDeviceType": "DDR4", "MemoryType": "DRAM",
                              "Status": {"State": "Enabled", "Health": "OK"}})


def _mask(prefix):
    bits = (0xFFFFFFFF << (32 - prefix)) & 0xFFFFFFFF
    return ".".join(str((bits >> s) & 0xFF) for s in (24, 16, 8, 0))
