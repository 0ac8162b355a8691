# SPDX-License-Identifier: GPL-3.0-or-later
"""Service root, the OData service document and ``$metadata`` (CSDL naming the DMTF schema of every type served)."""
from __future__ import annotations

import os
import re
from xml.sax.saxutils import quoteattr

from msa_sim.bmc import resource as R
from msa_sim.bmc.resource import Response

# Every versioned type and collection this service answers with; tests check each body's @odata.type is listed.
SERVED_TYPES = (
    "ServiceRoot.v1_15_0", "ComputerSystemCollection", "ComputerSystem.v1_20_0", "ActionInfo.v1_3_0",
    "EthernetInterfaceCollection", "EthernetInterface.v1_9_0", "ProcessorCollection", "Processor.v1_18_0",
    "MemoryCollection", "Memory.v1_17_0", "Bios.v1_2_0", "StorageCollection", "Storage.v1_15_0",
    "StorageControllerCollection", "StorageController.v1_7_0", "DriveCollection", "Drive.v1_17_0", "VolumeCollection",
    "VirtualMedia.v1_6_0", "HostInterface.v1_3_0", "Volume.v1_9_0", "SecureBoot.v1_1_0", "BootOptionCollection",
    "BootOption.v1_0_4", "Settings.v1_3_5", "ChassisCollection",
    "Chassis.v1_23_0", "Power.v1_7_1", "Thermal.v1_7_1", "PowerSubsystem.v1_1_3", "PowerSupplyCollection",
    "PowerSupply.v1_6_0", "ThermalSubsystem.v1_3_0", "FanCollection", "Fan.v1_5_0", "EnvironmentMetrics.v1_3_0",
    "ManagerCollection", "Manager.v1_19_0",
    "ManagerNetworkProtocol.v1_9_0", "LogServiceCollection", "LogService.v1_4_0", "LogEntryCollection",
    "LogEntry.v1_15_0", "VirtualMediaCollection", "HostInterfaceCollection", "SessionService.v1_1_9",
    "SessionCollection", "Session.v1_7_0", "AccountService.v1_13_0", "ManagerAccountCollection",
    "ManagerAccount.v1_10_0", "RoleCollection", "Role.v1_3_1", "UpdateService.v1_11_0",
    "SoftwareInventoryCollection", "SoftwareInventory.v1_9_0", "TaskService.v1_2_0", "TaskCollection",
    "Task.v1_7_1", "EventService.v1_10_0", "EventDestinationCollection", "EventDestination.v1_13_1",
    "Event.v1_8_0", "MessageRegistryFileCollection", "MessageRegistryFile.v1_1_3", "PrivilegeRegistry.v1_1_4",
    "Message.v1_1_1", "Resource.v1_16_0", "AttributeRegistry.v1_3_8",
)
# this service's own OEM schema (the Oem.MsaBmc object of a ComputerSystem), served at OEM_SCHEMA_URI
OEM_SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema", "MsaBmc_v1.xml")
OEM_SCHEMA_URI = R.ROOT + "/schema/MsaBmc_v1.xml"
OEM_NAMESPACES = ("MsaBmc", "MsaBmc.v1_0_0")
# the service document lists the service root's top-level resources
# (ServiceRoot property, path): the TaskService's property is "Tasks" in the ServiceRoot schema
SERVICE_DOCUMENT = (("Systems", "Systems"), ("Chassis", "Chassis"), ("Managers", "Managers"),
                    ("SessionService", "SessionService"), ("AccountService", "AccountService"),
                    ("UpdateService", "UpdateService"), ("Tasks", "TaskService"), ("EventService", "EventService"),
                    ("Registries", "Registries"))


def csdl():
    """The ``$metadata`` document: one edmx:Reference per schema file, then the Service entity container."""
    namespaces = {}
    for versioned in SERVED_TYPES + ("RedfishExtensions.v1_0_0",):
        base = versioned.split(".", 1)[0]
        namespaces.setdefault(base, [base])
        if versioned != base:
            namespaces[base].append(versioned)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">']
    for base in sorted(namespaces):
        uri = "%s%s_v1.xml" % (R.SCHEMAS, base)
        lines.append("  <edmx:Reference Uri=%s>" % quoteattr(uri))
        for namespace in namespaces[base]:
            alias = ' Alias="Redfish"' if namespace == "RedfishExtensions.v1_0_0" else ""
            lines.append("    <edmx:Include Namespace=%s%s/>" % (quoteattr(namespace), alias))
        lines.append("  </edmx:Reference>")
    lines.append("  <edmx:Reference Uri=%s>" % quoteattr(OEM_SCHEMA_URI))
    lines += ["    <edmx:Include Namespace=%s/>" % quoteattr(n) for n in OEM_NAMESPACES]
    lines.append("  </edmx:Reference>")
    lines += ['  <edmx:DataServices>',
              '    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">',
              '      <EntityContainer Name="Service" Extends="ServiceRoot.v1_15_0.ServiceContainer"/>',
              '    </Schema>', '  </edmx:DataServices>', '</edmx:Edmx>', '']
    return "\n".join(lines).encode()


class MetadataMixin:
    """The unauthenticated documents of the service (DSP0266 clause 7: /redfish, root, odata, $metadata)."""

    def metadata_routes(self):
        root = re.escape(R.ROOT)
        return [
            (r"/redfish", {"GET": (self.get_versions, None)}),
            (root, {"GET": (self.get_root, None)}),
            (root + r"/odata", {"GET": (self.get_odata, None)}),
            (root + r"/\$metadata", {"GET": (self.get_metadata, None)}),
            (re.escape(OEM_SCHEMA_URI), {"GET": (self.get_oem_schema, "Login")}),
        ]

    def get_versions(self, **_):
        return Response(200, {"v1": R.ROOT + "/"})

    def get_root(self, **_):
        body = {
            "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot", "@odata.id": R.ROOT + "/", "Id": "RootService",
            "Name": "Root Service", "RedfishVersion": "1.17.0", "UUID": self.conf["uuid"], "Vendor": "msa.hpc",
            "Product": "msa-bmc (simulated BMC of %s)" % self.name,
            "Links": {"Sessions": R.link(R.SESSIONS)},
            "ProtocolFeaturesSupported": {"ExpandQuery": {"ExpandAll": False, "Levels": False, "Links": False,
                                                          "NoLinks": False},
                                          "FilterQuery": False, "SelectQuery": False, "OnlyMemberQuery": False}}
        for name, path in self._top_level():
            body[name] = R.link("%s/%s" % (R.ROOT, path))
        if not self.conf["session_service"]:
            del body["Links"]
        return Response(200, body)

    def _top_level(self):
        return [(n, p) for n, p in SERVICE_DOCUMENT if self.conf["session_service"] or n != "SessionService"]

    def get_odata(self, **_):
        return Response(200, {"@odata.context": R.ROOT + "/$metadata", "value": [
            {"name": n, "kind": "Singleton", "url": "%s/%s" % (R.ROOT, p)} for n, p in self._top_level()]})

    def get_metadata(self, **_):
        return Response(200, data=csdl(), content_type="application/xml")

    def get_oem_schema(self, **_):
        with open(OEM_SCHEMA, "rb") as handle:
            return Response(200, data=handle.read(), content_type="application/xml")
