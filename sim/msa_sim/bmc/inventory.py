# SPDX-License-Identifier: GPL-3.0-or-later
"""Storage (the node's root disk), virtual media, host interfaces and the registries (BIOS attributes, message
registries) of one BMC."""
from __future__ import annotations

import re
import urllib.parse

from msa_sim.bmc import resource as R
from msa_sim.bmc.resource import Fail, Response

REGISTRIES = R.ROOT + "/Registries"
BIOS_REGISTRY = "MsaBiosAttributeRegistry.1.0.0"
MESSAGE_REGISTRIES = {"Base.1.16.0": "Base", "ResourceEvent.1.3.0": "ResourceEvent", "Update.1.0.2": "Update"}
MEDIA_TYPES = ("CD", "DVD", "USBStick")


class InventoryMixin:
    """Virtual media state (inserted image URL) is kept per process: a BMC restart ejects, as on hardware."""

    def __init__(self):
        self._media = {"Image": None, "Inserted": False, "WriteProtected": True, "MediaType": None}

    def inventory_routes(self):
        s, m = re.escape(self.sys_path), re.escape(self.manager_path)
        vm = s + r"/VirtualMedia/CD1"
        c = re.escape(self.chassis_path)
        r = re.escape(REGISTRIES)
        return [
            (s + r"/Storage", {"GET": (self.get_storage, "Login")}),
            (s + r"/Storage/1", {"GET": (self.get_storage_member, "Login")}),
            (s + r"/Storage/1/Controllers", {"GET": (self.get_controllers, "Login")}),
            (s + r"/Storage/1/Controllers/0", {"GET": (self.get_controller, "Login")}),
            (c + r"/Drives", {"GET": (self.get_drives, "Login")}),
            (c + r"/Drives/Disk0", {"GET": (self.get_drive, "Login")}),
            (s + r"/VirtualMedia", {"GET": (self.get_virtual_media, "Login")}),
            (vm, {"GET": (self.get_media, "Login"), "PATCH": (self.patch_media, "ConfigureManager")}),
            (vm + r"/Actions/VirtualMedia\.InsertMedia", {"POST": (self.post_insert_media, "ConfigureManager")}),
            (vm + r"/Actions/VirtualMedia\.EjectMedia", {"POST": (self.post_eject_media, "ConfigureManager")}),
            (m + r"/HostInterfaces", {"GET": (self.get_host_interfaces, "Login")}),
            (m + r"/HostInterfaces/1", {"GET": (self.get_host_interface, "Login")}),
            (r, {"GET": (self.get_registries, "Login")}),
            (r + r"/(?P<registry>[^/]+)", {"GET": (self.get_registry_file, "Login")}),
            (r + r"/%s/%s\.json" % (re.escape(BIOS_REGISTRY), "MsaBiosAttributeRegistry"),
             {"GET": (self.get_bios_registry, "Login")}),
        ]

    # ------------------------------------------------------------------ storage
    def _storage(self):
        return self.sys_path + "/Storage/1"

    def get_storage(self, **_):
        return Response(200, R.collection("StorageCollection", self.sys_path + "/Storage", "Storage Collection",
                                          [self._storage()]))

    def get_storage_member(self, **_):
        return Response(200, {"@odata.type": "#Storage.v1_15_0.Storage", "@odata.id": self._storage(), "Id": "1",
                              "Name": "Local Storage", "Controllers": R.link(self._storage() + "/Controllers"),
                              "Drives": [R.link(self.disk_path())],
                              "Volumes": R.link(self._storage() + "/Volumes"),
                              "Status": {"State": "Enabled", "Health": "OK", "HealthRollup": "OK"}})

    def get_controllers(self, **_):
        return Response(200, R.collection("StorageControllerCollection", self._storage() + "/Controllers",
                                          "Storage Controllers", [self._storage() + "/Controllers/0"]))

    def get_controller(self, **_):
        return Response(200, {"@odata.type": "#StorageController.v1_7_0.StorageController",
                              "@odata.id": self._storage() + "/Controllers/0", "Id": "0", "Name": "SATA Controller",
                              "Manufacturer": self.conf["manufacturer"], "Model": "SIM-AHCI", "SpeedGbps": 6,
                              "FirmwareVersion": "1.0", "SupportedControllerProtocols": ["PCIe"],
                              "SupportedDeviceProtocols": ["SATA"],
                              "Status": {"State": "Enabled", "Health": "OK"}})

    def disk_path(self):
        """The one drive, under the Chassis that holds it (a drive under Storage is a deprecated URI)."""
        return self.chassis_path + "/Drives/Disk0"

    def get_drives(self, **_):
        return Response(200, R.collection("DriveCollection", self.chassis_path + "/Drives", "Drives",
                                          [self.disk_path()]))

    def get_drive(self, **_):
        return Response(200, {"@odata.type": "#Drive.v1_17_0.Drive", "@odata.id": self.disk_path(),
                              "Id": "Disk0", "Name": "Root disk", "MediaType": "SSD", "Protocol": "SATA",
                              "CapacityBytes": self.conf["disk_gib"] << 30, "Model": "SIM-SSD",
                              "SerialNumber": "%s-DISK0" % self.conf["serial"], "Manufacturer": "MSA",
                              "Status": {"State": "Enabled", "Health": "OK"}})

    # ------------------------------------------------------------------ virtual media
    def _media_path(self):
        return self.sys_path + "/VirtualMedia/CD1"

    def get_virtual_media(self, **_):
        return Response(200, R.collection("VirtualMediaCollection", self.sys_path + "/VirtualMedia",
                                          "Virtual Media Services", [self._media_path()]))

    def get_media(self, **_):
        media = self._media
        path = self._media_path()
        return Response(200, {"@odata.type": "#VirtualMedia.v1_6_0.VirtualMedia", "@odata.id": path, "Id": "CD1",
                              "Name": "Virtual CD", "MediaTypes": list(MEDIA_TYPES), "ConnectedVia": "URI"
                              if media["Inserted"] else "NotConnected", "Image": media["Image"],
                              "ImageName": media["Image"].rsplit("/", 1)[-1] if media["Image"] else None,
                              "Inserted": media["Inserted"], "WriteProtected": media["WriteProtected"],
                              "TransferProtocolType": urllib.parse.urlsplit(media["Image"]).scheme.upper()
                              if media["Image"] else None,
                              "Actions": {"#VirtualMedia.InsertMedia": {
                                  "target": path + "/Actions/VirtualMedia.InsertMedia"},
                                  "#VirtualMedia.EjectMedia": {"target": path + "/Actions/VirtualMedia.EjectMedia"}}})

    def _image(self, value):
        parts = urllib.parse.urlsplit(value if isinstance(value, str) else "")
        if parts.scheme not in ("http", "https", "nfs", "cifs") or not parts.netloc:
            raise Fail(400, "ActionParameterValueFormatError", "The value '%s' for the parameter Image is not a "
                       "http, https, nfs or cifs URL." % (value,), args=[value, "Image", "InsertMedia"])
        return value

    def post_insert_media(self, data, **_):
        R.check_keys(data, ("Image", "Inserted", "WriteProtected", "TransferProtocolType", "TransferMethod",
                            "UserName", "Password", "MediaType"))
        if self._media["Inserted"]:
            raise Fail(409, "ResourceInUse", "Media is already inserted; eject it first.",
                       "Eject the media (VirtualMedia.EjectMedia) and resubmit the request.")
        self._media.update(Image=self._image(data.get("Image")), Inserted=bool(data.get("Inserted", True)),
                           WriteProtected=bool(data.get("WriteProtected", True)))
        return Response(204)

    def post_eject_media(self, **_):
        self._media.update(Image=None, Inserted=False, WriteProtected=True)
        return Response(204)

    def patch_media(self, data, **_):
        R.check_keys(data, ("Image", "Inserted", "WriteProtected"))
        if "Image" in data:
            self._media["Image"] = self._image(data["Image"]) if data["Image"] else None
        for key in ("Inserted", "WriteProtected"):
            if key in data:
                if not isinstance(data[key], bool):
                    raise R.type_error(data[key], key)
                self._media[key] = data[key]
        return self.get_media()

    # ------------------------------------------------------------------ host interfaces
    def get_host_interfaces(self, **_):
        return Response(200, R.collection("HostInterfaceCollection", self.manager_path + "/HostInterfaces",
                                          "Host Interfaces", [self.manager_path + "/HostInterfaces/1"]))

    def get_host_interface(self, **_):
        # a simulated node has no in-band path to its BMC: the interface exists and is disabled
        return Response(200, {"@odata.type": "#HostInterface.v1_3_0.HostInterface",
                              "@odata.id": self.manager_path + "/HostInterfaces/1", "Id": "1",
                              "Name": "Host interface", "HostInterfaceType": "NetworkHostInterface",
                              "InterfaceEnabled": False, "AuthenticationModes": ["BasicAuth", "RedfishSessionAuth"],
                              "Status": {"State": "Disabled", "Health": "OK"}})

    # ------------------------------------------------------------------ registries
    def get_registries(self, **_):
        return Response(200, R.collection("MessageRegistryFileCollection", REGISTRIES, "Registries",
                                          ["%s/%s" % (REGISTRIES, r) for r in list(MESSAGE_REGISTRIES) +
                                           [BIOS_REGISTRY]]))

    def get_registry_file(self, registry, **_):
        if registry == BIOS_REGISTRY:
            location = {"Language": "en", "Uri": "%s/%s/MsaBiosAttributeRegistry.json" % (REGISTRIES, registry)}
            kind = "MsaBiosAttributeRegistry"
        elif registry in MESSAGE_REGISTRIES:
            kind = MESSAGE_REGISTRIES[registry]
            location = {"Language": "en", "PublicationUri": "https://redfish.dmtf.org/registries/%s.json" % registry}
        else:
            raise R.missing("%s/%s" % (REGISTRIES, registry))
        return Response(200, {"@odata.type": "#MessageRegistryFile.v1_1_3.MessageRegistryFile",
                              "@odata.id": "%s/%s" % (REGISTRIES, registry), "Id": registry,
                              "Name": "%s registry file" % kind, "Registry": registry.rsplit(".", 1)[0],
                              "Languages": ["en"], "Location": [location]})

    def get_bios_registry(self, **_):
        attributes = [
            {"AttributeName": "BootMode", "Type": "Enumeration", "ReadOnly": True, "DisplayName": "Boot mode",
             "Value": [{"ValueName": "UEFI"}, {"ValueName": "Legacy"}]},
            {"AttributeName": "ProcessorCount", "Type": "Integer", "ReadOnly": True,
             "DisplayName": "Processor sockets"},
            {"AttributeName": "MemoryGiB", "Type": "Integer", "ReadOnly": True, "DisplayName": "Memory (GiB)"},
            {"AttributeName": "BiosVersion", "Type": "String", "ReadOnly": True, "DisplayName": "BIOS version"}]
        return Response(200, {"@odata.type": "#AttributeRegistry.v1_3_8.AttributeRegistry",
                              "Id": BIOS_REGISTRY, "Name": "MSA simulated BIOS attribute registry",
                              "Language": "en", "OwningEntity": "msa.hpc", "RegistryVersion": "1.0.0",
                              "RegistryEntries": {"Attributes": attributes}})
