# SPDX-License-Identifier: GPL-3.0-or-later
"""Chassis (power, thermal, environment) and Manager (the BMC itself: network protocols, NIC, logs) resources of one
BMC. The deprecated forms (Chassis Power and Thermal, IndicatorLED, the Manager's VirtualMedia link) are served only
while the BMC's ``deprecated_resources`` setting is on; the current forms (PowerSubsystem, ThermalSubsystem,
EnvironmentMetrics, LocationIndicatorActive) always are."""
from __future__ import annotations

import ipaddress
import re

from msa_sim.bmc import resource as R
from msa_sim.bmc.resource import Fail, Response

LED_STATES = ("Lit", "Blinking", "Off")
DEFAULTS_RESETS = ("ResetAll", "PreserveNetworkAndUsers", "PreserveNetwork")
FANS = ("Fan1", "Fan2")


def led_setting(data):
    """The LED state a PATCH asks for ("Lit", "Blinking", "Off" or None): IndicatorLED as given, or
    LocationIndicatorActive true (blinking, as identify LEDs do) or false; both at once must agree."""
    led = None
    if "IndicatorLED" in data:
        led = data["IndicatorLED"]
        if led not in LED_STATES:
            raise R.value_not_in_list(led, "IndicatorLED", LED_STATES)
    if "LocationIndicatorActive" in data:
        active = data["LocationIndicatorActive"]
        if not isinstance(active, bool):
            raise R.type_error(active, "LocationIndicatorActive")
        if led is not None and (led != "Off") != active:
            raise Fail(400, "PropertyValueConflict", "The property IndicatorLED (%s) conflicts with the property "
                       "LocationIndicatorActive (%s)." % (led, str(active).lower()),
                       "Send one of them, or values that agree.", args=["IndicatorLED", "LocationIndicatorActive"])
        led = led or ("Blinking" if active else "Off")
    return led


class ChassisMixin:
    """Chassis and Manager resources; the event log (``self.event_log``) is the manager's log service."""

    def chassis_routes(self, c):
        root = R.ROOT
        routes = [
            (re.escape(root) + r"/Chassis", {"GET": (self.get_chassis_collection, "Login")}),
            (c, {"GET": (self.get_chassis, "Login"), "PATCH": (self.patch_chassis, "ConfigureComponents")}),
            (c + r"/Actions/Chassis\.Reset", {"POST": (self.post_chassis_reset, "ConfigureComponents")}),
            (c + r"/PowerSubsystem", {"GET": (self.get_power_subsystem, "Login")}),
            (c + r"/PowerSubsystem/PowerSupplies", {"GET": (self.get_power_supplies, "Login")}),
            (c + r"/PowerSubsystem/PowerSupplies/PSU1", {"GET": (self.get_power_supply, "Login")}),
            (c + r"/ThermalSubsystem", {"GET": (self.get_thermal_subsystem, "Login")}),
            (c + r"/ThermalSubsystem/Fans", {"GET": (self.get_fans, "Login")}),
            (c + r"/ThermalSubsystem/Fans/(?P<fan>[^/]+)", {"GET": (self.get_fan, "Login")}),
            (c + r"/EnvironmentMetrics", {"GET": (self.get_environment_metrics, "Login")}),
        ]
        if self.conf["deprecated_resources"]:
            routes += [(c + r"/Power", {"GET": (self.get_power, "Login")}),
                       (c + r"/Thermal", {"GET": (self.get_thermal, "Login")})]
        return routes

    def manager_routes(self, m):
        return [
            (re.escape(R.ROOT) + r"/Managers", {"GET": (self.get_managers, "Login")}),
            (m, {"GET": (self.get_manager, "Login"), "PATCH": (self.patch_manager, "ConfigureManager")}),
            (m + r"/Actions/Manager\.Reset", {"POST": (self.post_manager_reset, "ConfigureManager")}),
            (m + r"/Actions/Manager\.ResetToDefaults", {"POST": (self.post_reset_to_defaults, "ConfigureManager")}),
            (m + r"/NetworkProtocol", {"GET": (self.get_network_protocol, "Login")}),
            (m + r"/EthernetInterfaces", {"GET": (self.get_manager_nics, "Login")}),
            (m + r"/EthernetInterfaces/BMC", {"GET": (self.get_manager_nic, "Login")}),
            (m + r"/LogServices", {"GET": (self.get_log_services, "Login")}),
            (m + r"/LogServices/EventLog", {"GET": (self.get_log_service, "Login")}),
            (m + r"/LogServices/EventLog/Entries", {"GET": (self.get_log_entries, "Login")}),
            (m + r"/LogServices/EventLog/Entries/(?P<entry>[^/]+)", {"GET": (self.get_log_entry, "Login")}),
            (m + r"/LogServices/EventLog/Actions/LogService\.ClearLog",
             {"POST": (self.post_clear_log, "ConfigureManager")}),
        ]

    def get_chassis_collection(self, **_):
        return Response(200, R.collection("ChassisCollection", R.ROOT + "/Chassis", "Chassis Collection",
                                         [self.chassis_path]))

    def get_chassis(self, **_):
        conf = self.conf
        state = self.power_state()
        body = {"@odata.type": "#Chassis.v1_23_0.Chassis", "@odata.id": self.chassis_path,
                "Id": conf["chassis_id"], "Name": "Chassis of %s" % conf["hostname"],
                "ChassisType": "RackMount", "Manufacturer": conf["manufacturer"],
                "Model": conf["model"], "SerialNumber": conf["serial"], "PowerState": state,
                "Status": {"State": "Enabled", "Health": "OK"},
                "PowerSubsystem": R.link(self.chassis_path + "/PowerSubsystem"),
                "ThermalSubsystem": R.link(self.chassis_path + "/ThermalSubsystem"),
                "EnvironmentMetrics": R.link(self.chassis_path + "/EnvironmentMetrics"),
                "LocationIndicatorActive": self.settings().get("chassis_led", "Off") != "Off",
                "Drives": R.link(self.chassis_path + "/Drives"),
                "Actions": {"#Chassis.Reset": {
                    "target": self.chassis_path + "/Actions/Chassis.Reset",
                    "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "PowerCycle"]}},
                "Links": {"ComputerSystems": [R.link(self.sys_path)],
                          "ManagedBy": [R.link(self.manager_path)]}}
        if self.conf["deprecated_resources"]:
            body.update({"Power": R.link(self.chassis_path + "/Power"),
                         "Thermal": R.link(self.chassis_path + "/Thermal"),
                         "IndicatorLED": self.settings().get("chassis_led", "Off")})
        return Response(200, body)

    def get_power(self, **_):
        power = self.conf["power"]
        watts = self.watts(self.power_state())
        return Response(200, {"@odata.type": "#Power.v1_7_1.Power", "@odata.id": self.chassis_path + "/Power",
                              "Id": "Power", "Name": "Power", "PowerControl": [{
                                  "@odata.id": self.chassis_path + "/Power#/PowerControl/0", "MemberId": "0",
                                  "Name": "System Power Control", "PowerConsumedWatts": watts,
                                  "PowerCapacityWatts": power["max_watts"],
                                  "PowerMetrics": {"IntervalInMin": 1, "MinConsumedWatts": watts,
                                                   "MaxConsumedWatts": watts, "AverageConsumedWatts": watts},
                                  "Status": {"State": "Enabled", "Health": "OK"}}],
                              "PowerSupplies": [{
                                  "@odata.id": self.chassis_path + "/Power#/PowerSupplies/0", "MemberId": "0",
                                  "Name": "PSU 1", "PowerCapacityWatts": power["max_watts"],
                                  "PowerSupplyType": "AC", "LineInputVoltage": 230, "Manufacturer": "MSA",
                                  "Model": "SIM-PSU", "SerialNumber": "%s-PSU1" % self.conf["serial"],
                                  "FirmwareVersion": "1.0", "LastPowerOutputWatts": watts,
                                  "Status": {"State": "Enabled", "Health": "OK"}}]})

    def get_power_subsystem(self, **_):
        path = self.chassis_path + "/PowerSubsystem"
        return Response(200, {"@odata.type": "#PowerSubsystem.v1_1_3.PowerSubsystem", "@odata.id": path,
                              "Id": "PowerSubsystem", "Name": "Power Subsystem",
                              "CapacityWatts": self.conf["power"]["max_watts"],
                              "PowerSupplies": R.link(path + "/PowerSupplies"),
                              "Status": {"State": "Enabled", "Health": "OK"}})

    def get_power_supplies(self, **_):
        path = self.chassis_path + "/PowerSubsystem/PowerSupplies"
        return Response(200, R.collection("PowerSupplyCollection", path, "Power Supply Collection", [path + "/PSU1"]))

    def get_power_supply(self, **_):
        return Response(200, {"@odata.type": "#PowerSupply.v1_6_0.PowerSupply",
                              "@odata.id": self.chassis_path + "/PowerSubsystem/PowerSupplies/PSU1", "Id": "PSU1",
                              "Name": "PSU 1", "PowerCapacityWatts": self.conf["power"]["max_watts"],
                              "PowerSupplyType": "AC", "Manufacturer": "MSA", "Model": "SIM-PSU",
                              "SerialNumber": "%s-PSU1" % self.conf["serial"], "FirmwareVersion": "1.0",
                              "Status": {"State": "Enabled", "Health": "OK"}})

    def _fan_rpm(self):
        return 6200 if self.power_state() == "On" else 0

    def get_thermal_subsystem(self, **_):
        path = self.chassis_path + "/ThermalSubsystem"
        return Response(200, {"@odata.type": "#ThermalSubsystem.v1_3_0.ThermalSubsystem", "@odata.id": path,
                              "Id": "ThermalSubsystem", "Name": "Thermal Subsystem",
                              "Fans": R.link(path + "/Fans"), "Status": {"State": "Enabled", "Health": "OK"}})

    def get_fans(self, **_):
        path = self.chassis_path + "/ThermalSubsystem/Fans"
        return Response(200, R.collection("FanCollection", path, "Fan Collection",
                                          ["%s/%s" % (path, f) for f in FANS]))

    def get_fan(self, fan, **_):
        if fan not in FANS:
            raise Fail(404, "ResourceMissingAtURI", "There is no fan %s in this chassis." % fan, args=[fan])
        return Response(200, {"@odata.type": "#Fan.v1_5_0.Fan",
                              "@odata.id": "%s/ThermalSubsystem/Fans/%s" % (self.chassis_path, fan), "Id": fan,
                              "Name": "Fan %s" % fan[3:], "PhysicalContext": "SystemBoard",
                              "SpeedPercent": {"SpeedRPM": self._fan_rpm()},
                              "Status": {"State": "Enabled", "Health": "OK"}})

    def _temperatures(self):
        """(inlet, CPU) in degrees Celsius."""
        inlet = 24.0
        return inlet, round(inlet + (31.0 if self.power_state() == "On" else 0.0), 1)

    def get_environment_metrics(self, **_):
        return Response(200, {"@odata.type": "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics",
                              "@odata.id": self.chassis_path + "/EnvironmentMetrics", "Id": "EnvironmentMetrics",
                              "Name": "Chassis Environment Metrics",
                              "TemperatureCelsius": {"Reading": self._temperatures()[0]},
                              "PowerWatts": {"Reading": self.watts(self.power_state())}})

    def get_managers(self, **_):
        return Response(200, R.collection("ManagerCollection", R.ROOT + "/Managers", "Manager Collection",
                                         [self.manager_path]))

    def get_manager(self, **_):
        conf = self.conf
        body = {"@odata.type": "#Manager.v1_19_0.Manager", "@odata.id": self.manager_path,
                "Id": conf["manager_id"], "Name": "BMC of %s" % conf["hostname"],
                "ManagerType": "BMC", "FirmwareVersion": self.firmware_versions()["BMC"],
                "Model": "msa-bmc", "PowerState": "On", "DateTime": R.iso(self.clock()),
                "DateTimeLocalOffset": "+00:00", "Status": {"State": "Enabled", "Health": "OK"},
                "UUID": conf["uuid"], "ServiceIdentification": self.settings().get("service_identification", ""),
                "Links": {"ManagerForServers": [R.link(self.sys_path)],
                          "ManagerForChassis": [R.link(self.chassis_path)]},
                "NetworkProtocol": R.link(self.manager_path + "/NetworkProtocol"),
                "EthernetInterfaces": R.link(self.manager_path + "/EthernetInterfaces"),
                "LogServices": R.link(self.manager_path + "/LogServices"),
                "HostInterfaces": R.link(self.manager_path + "/HostInterfaces"),
                "Actions": {"#Manager.Reset": {
                    "target": self.manager_path + "/Actions/Manager.Reset",
                    "ResetType@Redfish.AllowableValues": ["GracefulRestart", "ForceRestart"]},
                    "#Manager.ResetToDefaults": {
                        "target": self.manager_path + "/Actions/Manager.ResetToDefaults",
                        "ResetType@Redfish.AllowableValues": list(DEFAULTS_RESETS)}}}
        if self.conf["deprecated_resources"]:
            # deprecated here, kept for clients that look under the Manager (community.general's Manager
            # VirtualMediaInsert): the same media, which live under the System
            body["VirtualMedia"] = R.link(self.sys_path + "/VirtualMedia")
        return Response(200, body)

    def post_manager_reset(self, data, **_):
        """A BMC reset ends every session and clears injected faults; the node keeps running."""
        if data.get("ResetType", "GracefulRestart") not in ("GracefulRestart", "ForceRestart"):
            raise Fail(400, "ActionParameterValueNotInList", "ResetType %r is not GracefulRestart or ForceRestart."
                       % data.get("ResetType"), args=[data.get("ResetType"), "ResetType"])
        for session in self.store.sessions(self.name):
            self.store.delete_session(self.name, session["id"])
        with self._fault_lock:
            self._faults = []
        return Response(204)

    def post_reset_to_defaults(self, data, **_):
        """Factory defaults: settings, boot override, subscriptions, tasks' firmware versions stay; accounts added
        through the AccountService go unless users are preserved; every session ends."""
        reset_type = data.get("ResetType")
        if reset_type not in DEFAULTS_RESETS:
            raise R.value_not_in_list(reset_type, "ResetType", DEFAULTS_RESETS)
        self.store.update_system(self.name, settings="{}", boot_enabled="Disabled", boot_target="None",
                                 boot_mode="UEFI", session_timeout=None)
        for sid in self.store.subscriptions(self.name):
            self.store.delete_subscription(self.name, sid)
        if reset_type != "PreserveNetworkAndUsers":
            configured = {u["username"] for u in self.conf["users"]}
            for account in self.store.accounts(self.name):
                if account["username"] not in configured:
                    self.store.delete_account(self.name, account["id"])
            self.store.seed_accounts(self.name, self.conf["users"], force=True)
        for session in self.store.sessions(self.name):
            self.store.delete_session(self.name, session["id"])
        return Response(204)

    def patch_chassis(self, data, **_):
        R.check_keys(data, ("LocationIndicatorActive", "IndicatorLED") if self.conf["deprecated_resources"]
                     else ("LocationIndicatorActive",))
        led = led_setting(data)
        if led:
            self.save_settings(chassis_led=led)
        return self.get_chassis()

    def post_chassis_reset(self, data, **_):
        reset_type = data.get("ResetType")
        if reset_type not in ("On", "ForceOff", "PowerCycle"):
            raise R.value_not_in_list(reset_type, "ResetType", ("On", "ForceOff", "PowerCycle"))
        self.reset(reset_type if reset_type in self.conf["reset_types"] else
                   {"PowerCycle": "ForceRestart"}.get(reset_type, reset_type))
        return Response(204)

    def get_thermal(self, **_):
        fan_rpm = self._fan_rpm()
        inlet, cpu = self._temperatures()
        return Response(200, {"@odata.type": "#Thermal.v1_7_1.Thermal", "@odata.id": self.chassis_path + "/Thermal",
                              "Id": "Thermal", "Name": "Thermal",
                              "Fans": [{"@odata.id": "%s/Thermal#/Fans/%d" % (self.chassis_path, i),
                                        "MemberId": str(i), "Name": "Fan %d" % (i + 1), "Reading": fan_rpm,
                                        "ReadingUnits": "RPM", "PhysicalContext": "SystemBoard",
                                        "Status": {"State": "Enabled", "Health": "OK"}} for i in range(2)],
                              "Temperatures": [
                                  {"@odata.id": self.chassis_path + "/Thermal#/Temperatures/0", "MemberId": "0",
                                   "Name": "Inlet Temp", "ReadingCelsius": inlet, "PhysicalContext": "Intake",
                                   "UpperThresholdCritical": 45, "Status": {"State": "Enabled", "Health": "OK"}},
                                  {"@odata.id": self.chassis_path + "/Thermal#/Temperatures/1", "MemberId": "1",
                                   "Name": "CPU Temp", "ReadingCelsius": cpu, "PhysicalContext": "CPU",
                                   "UpperThresholdCritical": 95, "Status": {"State": "Enabled", "Health": "OK"}}]})

    def patch_manager(self, data, **_):
        R.check_keys(data, ("ServiceIdentification", "DateTimeLocalOffset"))
        if "DateTimeLocalOffset" in data and data["DateTimeLocalOffset"] != "+00:00":
            raise R.value_not_in_list(data["DateTimeLocalOffset"], "DateTimeLocalOffset", ["+00:00"])
        value = data.get("ServiceIdentification", "")
        if not isinstance(value, str) or len(value) > 99:
            raise R.type_error(value, "ServiceIdentification")
        if "ServiceIdentification" in data:
            self.save_settings(service_identification=value)
        return self.get_manager()

    def get_network_protocol(self, **_):
        tls = bool(self.conf["tls"])
        return Response(200, {"@odata.type": "#ManagerNetworkProtocol.v1_9_0.ManagerNetworkProtocol",
                              "@odata.id": self.manager_path + "/NetworkProtocol", "Id": "NetworkProtocol",
                              "Name": "Manager Network Protocol", "HostName": "%s-bmc" % self.conf["hostname"],
                              "FQDN": "%s-bmc" % self.conf["hostname"],
                              "HTTP": {"ProtocolEnabled": not tls, "Port": None if tls else self.conf["port"]},
                              "HTTPS": {"ProtocolEnabled": tls, "Port": self.conf["port"] if tls else None},
                              "SSH": {"ProtocolEnabled": False}, "IPMI": {"ProtocolEnabled": False},
                              "SSDP": {"ProtocolEnabled": False}, "SNMP": {"ProtocolEnabled": False},
                              "Status": {"State": "Enabled", "Health": "OK"}})

    def get_manager_nics(self, **_):
        return Response(200, R.collection("EthernetInterfaceCollection", self.manager_path + "/EthernetInterfaces",
                                          "Manager Ethernet Interfaces", [self.manager_path + "/EthernetInterfaces/BMC"]))

    def get_manager_nic(self, **_):
        address = self.conf["address"]
        body = {"@odata.type": "#EthernetInterface.v1_9_0.EthernetInterface",
                "@odata.id": self.manager_path + "/EthernetInterfaces/BMC", "Id": "BMC", "Name": "BMC interface",
                "InterfaceEnabled": True, "LinkStatus": "LinkUp", "HostName": "%s-bmc" % self.conf["hostname"],
                "MACAddress": "02:BC:" + ":".join("%02X" % b for b in self.conf["uuid"].encode()[:4]),
                "Status": {"State": "Enabled", "Health": "OK"}}
        ip = ipaddress.ip_address(address)
        body.update({"NameServers": [], "StaticNameServers": [], "IPv4Addresses": [], "IPv4StaticAddresses": [],
                     "IPv6Addresses": [], "IPv6StaticAddresses": []})
        if ip.version == 4:
            # the management network is a /24 whose first host is the router (the harness's bridge address)
            network = ipaddress.ip_network("%s/24" % address, strict=False)
            entry = {"Address": address, "SubnetMask": str(network.netmask), "Gateway": str(next(network.hosts()))}
            body["IPv4Addresses"] = [dict(entry, AddressOrigin="Static")]
            body["IPv4StaticAddresses"] = [entry]
        else:
            body["IPv6Addresses"] = [{"Address": address, "AddressOrigin": "Static", "PrefixLength": 64}]
            body["IPv6StaticAddresses"] = [{"Address": address, "PrefixLength": 64}]
        return Response(200, body)

    def _log_path(self):
        return self.manager_path + "/LogServices/EventLog"

    def get_log_services(self, **_):
        return Response(200, R.collection("LogServiceCollection", self.manager_path + "/LogServices",
                                          "Log Service Collection", [self._log_path()]))

    def get_log_service(self, **_):
        return Response(200, {"@odata.type": "#LogService.v1_4_0.LogService", "@odata.id": self._log_path(),
                              "Id": "EventLog", "Name": "Event Log", "ServiceEnabled": True, "LogEntryType": "Event",
                              "OverWritePolicy": "WrapsWhenFull", "MaxNumberOfRecords": self.event_log.maxlen,
                              "DateTime": R.iso(self.clock()), "DateTimeLocalOffset": "+00:00",
                              "Entries": R.link(self._log_path() + "/Entries"),
                              "Actions": {"#LogService.ClearLog": {
                                  "target": self._log_path() + "/Actions/LogService.ClearLog"}},
                              "Status": {"State": "Enabled", "Health": "OK"}})

    def _log_entry(self, entry):
        return {"@odata.type": "#LogEntry.v1_15_0.LogEntry",
                "@odata.id": "%s/Entries/%s" % (self._log_path(), entry["EventId"]), "Id": entry["EventId"],
                "Name": "Log Entry %s" % entry["EventId"], "EntryType": "Event", "Severity": entry["Severity"],
                "Created": entry["EventTimestamp"], "Message": entry["Message"], "MessageId": entry["MessageId"],
                "MessageArgs": entry["MessageArgs"],
                "Links": {"OriginOfCondition": entry["OriginOfCondition"]}}

    def get_log_entries(self, **_):
        entries = [self._log_entry(e) for e in list(self.event_log)]
        body = R.collection("LogEntryCollection", self._log_path() + "/Entries", "Log Entries", [])
        body["Members"], body["Members@odata.count"] = entries, len(entries)
        return Response(200, body)

    def get_log_entry(self, entry, **_):
        for event in list(self.event_log):
            if event["EventId"] == entry:
                return Response(200, self._log_entry(event))
        raise R.missing("%s/Entries/%s" % (self._log_path(), entry))

    def post_clear_log(self, **_):
        self.event_log.clear()
        return Response(204)
