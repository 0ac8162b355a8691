# SPDX-License-Identifier: GPL-3.0-or-later
"""Firmware settings of one system: BIOS attributes (pending in Bios/Settings until the next boot), Secure Boot,
boot options and their order, and volumes on the root disk. All persisted in the system's settings."""
from __future__ import annotations

import re
import secrets

from msa_sim.bmc import resource as R
from msa_sim.bmc.resource import Fail, Response

# writable BIOS attributes and their values; read-only ones come from the configuration
BIOS_ATTRIBUTES = {"BootMode": ("UEFI", "Legacy"), "HyperThreading": ("Enabled", "Disabled"),
                   "SriovGlobalEnable": ("Enabled", "Disabled")}
BIOS_DEFAULTS = {"BootMode": "UEFI", "HyperThreading": "Enabled", "SriovGlobalEnable": "Disabled"}
SECURE_BOOT_MODES = ("SetupMode", "UserMode", "AuditMode", "DeployedMode")


class BiosMixin:
    """BIOS, SecureBoot, BootOptions and Volumes; ``apply_pending_bios`` runs at every boot the BMC sees."""

    def bios_routes(self):
        s = re.escape(self.sys_path)
        vols = re.escape(self.sys_path + "/Storage/1/Volumes")
        return [
            (s + r"/Bios", {"GET": (self.get_bios, "Login")}),
            (s + r"/Bios/Settings", {"GET": (self.get_bios_settings, "Login"),
                                     "PATCH": (self.patch_bios_settings, "ConfigureComponents")}),
            (s + r"/Bios/Actions/Bios\.ResetBios", {"POST": (self.post_reset_bios, "ConfigureComponents")}),
            (s + r"/SecureBoot", {"GET": (self.get_secure_boot, "Login"),
                                  "PATCH": (self.patch_secure_boot, "ConfigureComponents")}),
            (s + r"/BootOptions", {"GET": (self.get_boot_options, "Login")}),
            (s + r"/BootOptions/(?P<option>[^/]+)", {"GET": (self.get_boot_option, "Login")}),
            (s + r"/Actions/ComputerSystem\.SetDefaultBootOrder",
             {"POST": (self.post_default_boot_order, "ConfigureComponents")}),
            (vols, {"GET": (self.get_volumes, "Login"), "POST": (self.post_volume, "ConfigureComponents")}),
            (vols + r"/(?P<volume>[^/]+)", {"GET": (self.get_volume, "Login"),
                                           "DELETE": (self.delete_volume, "ConfigureComponents")}),
        ]

    # ------------------------------------------------------------------ BIOS
    def bios_attributes(self):
        conf = self.conf
        current = dict(BIOS_DEFAULTS, **self.settings().get("bios", {}))
        current["BootMode"] = self.store.system(self.name)["boot_mode"]
        current.update(ProcessorCount=conf["cpus"]["count"], MemoryGiB=conf["memory_gib"],
                       BiosVersion=self.firmware_versions()["BIOS"])
        return current

    def get_bios(self, **_):
        path = self.sys_path + "/Bios"
        return Response(200, {"@odata.type": "#Bios.v1_2_0.Bios", "@odata.id": path, "Id": "Bios",
                              "Name": "BIOS Configuration Current Settings",
                              "AttributeRegistry": "MsaBiosAttributeRegistry.1.0.0",
                              "Attributes": self.bios_attributes(),
                              "@Redfish.Settings": {"@odata.type": "#Settings.v1_3_5.Settings",
                                                    "SettingsObject": R.link(path + "/Settings"),
                                                    "SupportedApplyTimes": ["OnReset"]},
                              "Actions": {"#Bios.ResetBios": {"target": path + "/Actions/Bios.ResetBios"}}})

    def get_bios_settings(self, **_):
        return Response(200, {"@odata.type": "#Bios.v1_2_0.Bios", "@odata.id": self.sys_path + "/Bios/Settings",
                              "Id": "Settings", "Name": "BIOS Configuration Pending Settings",
                              "AttributeRegistry": "MsaBiosAttributeRegistry.1.0.0",
                              "Attributes": dict(self.settings().get("bios_pending", {}))})

    def patch_bios_settings(self, data, **_):
        R.check_keys(data, ("Attributes", "@Redfish.SettingsApplyTime"))
        attributes = data.get("Attributes") or {}
        if not isinstance(attributes, dict):
            raise R.type_error(attributes, "Attributes")
        for key, value in attributes.items():
            if key not in BIOS_ATTRIBUTES:
                raise Fail(400, "PropertyNotWritable" if key in self.bios_attributes() else "PropertyUnknown",
                           "The BIOS attribute %s is not writable (writable: %s)." % (key, ", ".join(BIOS_ATTRIBUTES)),
                           args=["Attributes/" + key])
            if value not in BIOS_ATTRIBUTES[key]:
                raise R.value_not_in_list(value, "Attributes/" + key, BIOS_ATTRIBUTES[key])
        pending = dict(self.settings().get("bios_pending", {}), **attributes)
        self.save_settings(bios_pending=pending)
        return self.get_bios_settings()

    def apply_pending_bios(self):
        """A boot applies the pending BIOS settings (as firmware does on reset)."""
        settings = self.settings()
        pending = settings.get("bios_pending")
        if not pending:
            return
        if "BootMode" in pending:
            self.store.update_system(self.name, boot_mode=pending["BootMode"])
        bios = dict(settings.get("bios", {}), **{k: v for k, v in pending.items() if k != "BootMode"})
        self.save_settings(bios=bios, bios_pending={})

    def post_reset_bios(self, **_):
        self.save_settings(bios_pending=dict(BIOS_DEFAULTS))
        return Response(204)

    # ------------------------------------------------------------------ Secure Boot
    def get_secure_boot(self, **_):
        enabled = self.settings().get("secure_boot", False)
        on = self.power_state() == "On"
        return Response(200, {"@odata.type": "#SecureBoot.v1_1_0.SecureBoot", "@odata.id": self.sys_path +
                              "/SecureBoot", "Id": "SecureBoot", "Name": "UEFI Secure Boot",
                              "SecureBootEnable": enabled, "SecureBootMode": "DeployedMode" if enabled else "UserMode",
                              "SecureBootCurrentBoot": "Enabled" if enabled and on else "Disabled"})

    def patch_secure_boot(self, data, **_):
        R.check_keys(data, ("SecureBootEnable",))
        if "SecureBootEnable" in data:
            if not isinstance(data["SecureBootEnable"], bool):
                raise R.type_error(data["SecureBootEnable"], "SecureBootEnable")
            self.save_settings(secure_boot=data["SecureBootEnable"])
        return self.get_secure_boot()

    # ------------------------------------------------------------------ boot options
    def boot_options(self):
        """BootXXXX reference -> boot target, in the configuration's order."""
        targets = [t for t in self.conf["boot_targets"] if t != "None"]
        return {"Boot%04X" % i: target for i, target in enumerate(targets)}

    def get_boot_options(self, **_):
        return Response(200, R.collection("BootOptionCollection", self.sys_path + "/BootOptions", "Boot Options",
                                          ["%s/BootOptions/%s" % (self.sys_path, r) for r in self.boot_options()]))

    def get_boot_option(self, option, **_):
        options = self.boot_options()
        if option not in options:
            raise R.missing("%s/BootOptions/%s" % (self.sys_path, option))
        return Response(200, {"@odata.type": "#BootOption.v1_0_4.BootOption",
                              "@odata.id": "%s/BootOptions/%s" % (self.sys_path, option), "Id": option,
                              "Name": options[option], "BootOptionReference": option,
                              "DisplayName": options[option], "BootOptionEnabled": True,
                              "UefiDevicePath": "VenMsg(msa-%s)" % options[option].lower()})

    def post_default_boot_order(self, **_):
        self.save_settings(boot_order=None)
        return Response(204)

    # ------------------------------------------------------------------ volumes
    def _volumes(self):
        return self.settings().get("volumes", {})

    def _volume_path(self, vid):
        return "%s/Storage/1/Volumes/%s" % (self.sys_path, vid)

    def get_volumes(self, **_):
        return Response(200, R.collection("VolumeCollection", self.sys_path + "/Storage/1/Volumes", "Volumes",
                                          [self._volume_path(v) for v in self._volumes()]))

    def _volume_body(self, vid, volume):
        return {"@odata.type": "#Volume.v1_9_0.Volume", "@odata.id": self._volume_path(vid), "Id": vid,
                "Name": volume["Name"], "RAIDType": volume["RAIDType"], "CapacityBytes": volume["CapacityBytes"],
                "Links": {"Drives": [R.link(d) for d in volume["Drives"]]},
                "Status": {"State": "Enabled", "Health": "OK"}}

    def get_volume(self, volume, **_):
        volumes = self._volumes()
        if volume not in volumes:
            raise R.missing(self._volume_path(volume))
        return Response(200, self._volume_body(volume, volumes[volume]))

    def post_volume(self, data, **_):
        R.check_keys(data, ("Name", "DisplayName", "RAIDType", "Links", "CapacityBytes", "InitializeMethod"))
        disk = self.disk_path()
        if data.get("RAIDType", "None") != "None":
            raise R.value_not_in_list(data["RAIDType"], "RAIDType", ["None"])
        drives = [d.get("@odata.id") for d in (data.get("Links") or {}).get("Drives") or [] if isinstance(d, dict)]
        if drives != [disk]:
            raise Fail(400, "PropertyValueIncorrect", "Links/Drives must name the one drive %s." % disk,
                       args=[drives, "Links/Drives"])
        volumes = self._volumes()
        if volumes:
            raise Fail(400, "CreateLimitReachedForResource", "The drive already holds a volume (one volume per "
                       "drive with RAIDType None).", "Delete the volume first.")
        capacity = self.conf["disk_gib"] << 30
        if data.get("CapacityBytes") not in (None, capacity):
            raise Fail(400, "PropertyValueIncorrect", "CapacityBytes must be the whole drive (%d)." % capacity,
                       args=[data["CapacityBytes"], "CapacityBytes"])
        vid = secrets.token_hex(3)
        volumes[vid] = {"Name": str(data.get("Name") or data.get("DisplayName") or "Volume"), "RAIDType": "None",
                        "CapacityBytes": capacity, "Drives": drives}
        self.save_settings(volumes=volumes)
        body = self._volume_body(vid, volumes[vid])
        return Response(201, body, {"Location": body["@odata.id"]})

    def delete_volume(self, volume, **_):
        volumes = self._volumes()
        if volume not in volumes:
            raise R.missing(self._volume_path(volume))
        del volumes[volume]
        self.save_settings(volumes=volumes)
        return Response(204)
