# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""One BMC's Redfish resources and actions, following the DMTF schema; HTTP-free so it is testable directly."""

import base64
import binascii
import datetime
import hashlib
import json
import math
import re
import secrets
import threading
import time

from msa_sim.bmc.auth import CredentialCache
from msa_sim.bmc.backend import BackendError
from msa_sim.bmc.config import ConfigError, validate_fault

ROOT = "/redfish/v1"
SESSIONS = ROOT + "/SessionService/Sessions"
FAULTS = "/msa-bmc/faults"
BOOT_ENABLED = ("Disabled", "Once", "Continuous")
BOOT_MODES = ("UEFI", "Legacy")
PRIVILEGE = {"ReadOnly": 0, "Operator": 1, "Administrator": 2}
BASE = "Base.1.16."


class Response:
    def __init__(self, status, body=None, headers=None):
        self.status = status
        self.body = body
        self.headers = dict(headers or {})


class Fail(Exception):
    """An error answer: HTTP status plus a DMTF Base registry message."""

    def __init__(self, status, message_id, message, resolution="None.", headers=None, args=()):
        super().__init__(message)
        self.status = status
        self.message_id = message_id
        self.message = message
        self.resolution = resolution
        self.headers = headers or {}
        self.args_ = list(args)

    def response(self):
        return Response(self.status, error_body(self.message_id, self.message, self.resolution, self.args_),
                        self.headers)


def error_body(message_id, message, resolution="None.", args=()):
    return {"error": {"code": BASE + message_id, "message": message, "@Message.ExtendedInfo": [{
        "@odata.type": "#Message.v1_1_1.Message", "MessageId": BASE + message_id, "Message": message,
        "MessageArgs": [str(a) for a in args], "Severity": "Critical", "Resolution": resolution}]}}


def _iso(ts):
    if ts is None:
        return None
    # milliseconds, so two resets within one second still differ (clients wait for LastResetTime to move)
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+00:00"


def _link(path):
    return {"@odata.id": path}


def _collection(odata_type, path, name, members):
    return {"@odata.type": "#%s.%s" % (odata_type, odata_type), "@odata.id": path, "Name": name,
            "Members": [_link(m) for m in members], "Members@odata.count": len(members)}


def etag(body):
    return 'W/"%s"' % hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


class Principal:
    def __init__(self, username, role, session=None):
        self.username = username
        self.role = role
        self.session = session


class Bmc:
    """The Redfish service of one simulated node's BMC."""

    def __init__(self, conf, backend, store, clock=time.time, log=None):
        self.conf = conf
        self.name = conf["name"]
        self.backend = backend
        self.store = store
        self.clock = clock
        self.log = log
        self.users = {u["username"]: u for u in conf["users"]}
        self.creds = CredentialCache()
        self.sys_path = "%s/Systems/%s" % (ROOT, conf["system_id"])
        self.chassis_path = "%s/Chassis/%s" % (ROOT, conf["chassis_id"])
        self.manager_path = "%s/Managers/%s" % (ROOT, conf["manager_id"])
        self._faults = [dict(conf["faults"])] if conf.get("faults") else []
        self._fault_lock = threading.Lock()
        self._power_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._observe_lock = threading.RLock()  # power-state bookkeeping is read-modify-write
        self._transition = None
        self._cancel = False
        self._worker = None
        self.last_error = None
        self._routes = self._make_routes()

    # ------------------------------------------------------------------ dispatch
    def _make_routes(self):
        s, c, m = (re.escape(p) for p in (self.sys_path, self.chassis_path, self.manager_path))
        table = [
            (r"/redfish", {"GET": self.get_versions}, False),
            (re.escape(ROOT), {"GET": self.get_root}, False),
            (re.escape(ROOT) + r"/odata", {"GET": self.get_odata}, False),
            (re.escape(ROOT) + r"/Systems", {"GET": self.get_systems}, True),
            (s, {"GET": self.get_system, "PATCH": self.patch_system}, True),
            (s + r"/Actions/ComputerSystem\.Reset", {"POST": self.post_reset}, True),
            (s + r"/ResetActionInfo", {"GET": self.get_reset_info}, True),
            (s + r"/EthernetInterfaces", {"GET": self.get_nics}, True),
            (s + r"/EthernetInterfaces/(?P<nic>[^/]+)", {"GET": self.get_nic}, True),
            (s + r"/Processors", {"GET": self.get_processors}, True),
            (s + r"/Processors/(?P<cpu>[^/]+)", {"GET": self.get_processor}, True),
            (s + r"/Memory", {"GET": self.get_memories}, True),
            (s + r"/Memory/(?P<dimm>[^/]+)", {"GET": self.get_memory}, True),
            (re.escape(ROOT) + r"/Chassis", {"GET": self.get_chassis_collection}, True),
            (c, {"GET": self.get_chassis}, True),
            (c + r"/Power", {"GET": self.get_power}, True),
            (re.escape(ROOT) + r"/Managers", {"GET": self.get_managers}, True),
            (m, {"GET": self.get_manager}, True),
            (m + r"/Actions/Manager\.Reset", {"POST": self.post_manager_reset}, True),
            (re.escape(ROOT) + r"/SessionService", {"GET": self.get_session_service,
                                                    "PATCH": self.patch_session_service}, True),
            (re.escape(SESSIONS), {"GET": self.get_sessions, "POST": self.post_session}, True),
            (re.escape(SESSIONS) + r"/(?P<sid>[^/]+)", {"GET": self.get_session, "DELETE": self.delete_session},
             True),
            (re.escape(FAULTS), {"GET": self.get_faults, "POST": self.post_faults, "DELETE": self.delete_faults},
             True),
        ]
        if not self.conf["session_service"]:
            table = [t for t in table if "SessionService" not in t[0]]
        return [(re.compile(pattern + r"$"), methods, auth) for pattern, methods, auth in table]

    def handle(self, method, path, headers, body=b""):
        """Answer one request: ``headers`` is any mapping, ``body`` the raw bytes."""
        headers = {str(k).lower(): v for k, v in dict(headers or {}).items()}
        path = path.split("?", 1)[0].split("#", 1)[0]
        if len(path) > 1:
            path = path.rstrip("/")
        method = method.upper()
        who = None
        try:
            if not path.startswith(FAULTS):
                self._inject_fault(path)
            for pattern, methods, needs_auth in self._routes:
                match = pattern.match(path)
                if not match:
                    continue
                if method not in methods:
                    raise Fail(405, "OperationNotAllowed", "The %s method is not allowed on %s." % (method, path),
                               headers={"Allow": ", ".join(sorted(methods))})
                if path == SESSIONS and method == "POST":
                    needs_auth = False
                who = self._authenticate(headers) if needs_auth else None
                data = None
                if method in ("POST", "PATCH"):
                    data = self._json(body)
                response = methods[method](who=who, data=data, headers=headers, **match.groupdict())
                break
            else:
                raise Fail(404, "ResourceMissingAtURI", "The resource at the URI %s was not found." % path,
                           "Place a valid resource at the URI or correct the URI and resubmit the request.",
                           args=[path])
        except Fail as exc:
            response = exc.response()
        except BackendError as exc:
            self.last_error = str(exc)
            response = Fail(500, "InternalError", "The power backend failed: %s" % exc,
                            "Check the msa-bmc service log and the node's container.").response()
        response.headers.setdefault("OData-Version", "4.0")
        if method == "GET" and response.status == 200 and isinstance(response.body, dict):
            response.headers.setdefault("ETag", etag(response.body))
        if self.log:
            self.log("%s %s %s %s user=%s" % (self.name, method, path, response.status, who.username if who else "-"))
        return response

    def _json(self, body):
        if not body:
            return {}
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise Fail(400, "MalformedJSON", "The request body submitted was malformed JSON and could not be "
                       "parsed by the receiving service.", "Ensure that the request body is valid JSON.") from None
        if not isinstance(data, dict):
            raise Fail(400, "MalformedJSON", "The request body must be a JSON object.")
        return data

    # ------------------------------------------------------------------ faults
    def _inject_fault(self, path):
        with self._fault_lock:
            fault = next((f for f in self._faults if path.startswith(f["path"])), None)
            if fault is None:
                return
            fault["count"] -= 1
            if fault["count"] <= 0:
                self._faults.remove(fault)
        if fault["delay"]:
            time.sleep(fault["delay"])
        if fault["status"]:
            raise Fail(fault["status"], "ServiceTemporarilyUnavailable",
                       "The service is temporarily unavailable (injected fault).",
                       "Wait for the indicated retry duration and retry the operation.",
                       headers={"Retry-After": "1"}, args=["1"])

    def get_faults(self, who, **_):
        self._require(who, "Administrator")
        with self._fault_lock:
            return Response(200, {"Faults": [dict(f) for f in self._faults]})

    def post_faults(self, who, data, **_):
        self._require(who, "Administrator")
        try:
            fault = validate_fault(data, "fault")
        except ConfigError as exc:
            raise Fail(400, "PropertyValueIncorrect", str(exc)) from None
        with self._fault_lock:
            self._faults.append(fault)
            return Response(201, {"Faults": [dict(f) for f in self._faults]})

    def delete_faults(self, who, **_):
        self._require(who, "Administrator")
        with self._fault_lock:
            self._faults = []
        return Response(204)

    # ------------------------------------------------------------------ authentication
    def _unauthorized(self, message="The request requires a valid X-Auth-Token session or basic authentication."):
        return Fail(401, "NoValidSession", message,
                    "Establish a session (POST %s) or send valid basic authentication credentials." % SESSIONS,
                    headers={"WWW-Authenticate": 'Basic realm="%s"' % self.name})

    def _check_password(self, username, password):
        user = self.users.get(username)
        if user is None or not self.creds.check(username, password, user["password_hash"]):
            return None
        return user

    def _authenticate(self, headers):
        token = headers.get("x-auth-token")
        if token:
            digest = hashlib.sha256(token.encode()).hexdigest()
            session = self.store.session_by_token(self.name, digest)
            now = self.clock()
            if session is None:
                raise self._unauthorized("The session token is not valid (unknown, logged out or expired).")
            if now - session["last_used"] > self._session_timeout():
                self.store.delete_session(self.name, session["id"])
                raise self._unauthorized("The session has expired after %d seconds without use."
                                         % self._session_timeout())
            if now - session["last_used"] >= 1.0:  # one write a second at most, not one per request
                self.store.touch_session(self.name, session["id"], now)
            return Principal(session["username"], session["role"], session)
        auth = headers.get("authorization") or ""
        if auth[:6].lower() == "basic ":
            try:
                username, _, password = base64.b64decode(auth[6:].strip()).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise self._unauthorized("The basic authentication header is malformed.") from None
            user = self._check_password(username, password)
            if user is None:
                raise self._unauthorized("The user name or password is not correct.")
            return Principal(user["username"], user["role"])
        raise self._unauthorized()

    def _require(self, who, role):
        if who is None or PRIVILEGE[who.role] < PRIVILEGE[role]:
            raise Fail(403, "InsufficientPrivilege", "There are insufficient privileges for the account or "
                       "credentials associated with the current session to perform the requested operation.",
                       "Either abandon the operation or change the associated access rights and resubmit the "
                       "request if the operation failed.")

    def _session_timeout(self):
        return self.store.system(self.name)["session_timeout"] or self.conf["session_timeout"]

    # ------------------------------------------------------------------ power
    def power_state(self):
        with self._state_lock:
            if self._transition:
                return self._transition
        state = "On" if self.backend.is_on(self.conf["container"]) else "Off"
        self._observe(state)
        return state

    def _observe(self, state):
        """Track power transitions, so a start from outside the BMC also counts as a boot."""
        with self._observe_lock:
            row = self.store.system(self.name)
            if row["last_power"] == "Off" and state == "On":
                self._booted()
            elif row["last_power"] != state:
                self.store.update_system(self.name, last_power=state)

    def _booted(self):
        with self._observe_lock:
            row = self.store.system(self.name)
            values = {"last_power": "On", "last_reset": self.clock(), "boots": row["boots"] + 1,
                      "last_boot_target": row["boot_target"] if row["boot_enabled"] != "Disabled" else "None"}
            if row["boot_enabled"] == "Once":
                values["boot_enabled"] = "Disabled"
            self.store.update_system(self.name, **values)

    def reset(self, reset_type):
        if reset_type not in self.conf["reset_types"]:
            raise Fail(400, "ActionParameterValueNotInList",
                       "The value '%s' for the parameter ResetType in the action ComputerSystem.Reset is not in "
                       "the list of acceptable values (%s)." % (reset_type, ", ".join(self.conf["reset_types"])),
                       "Choose a value from the enumeration list that the implementation can support and "
                       "resubmit the request if the operation failed.", args=[reset_type, "ResetType"])
        container = self.conf["container"]
        with self._state_lock:
            busy = self._transition
            if busy and reset_type != "ForceOff":
                raise Fail(409, "ResourceInUse", "The system is %s; ResetType %s is refused until that finishes "
                           "(ForceOff is accepted)." % (busy, reset_type),
                           "Wait until PowerState is On or Off, or use ForceOff.")
            if busy:
                self._cancel = True
        with self._power_lock:
            on = self.backend.is_on(container)
            if reset_type == "PushPowerButton":
                reset_type = "GracefulShutdown" if on else "On"
            if reset_type == "On":
                if not on:
                    self.backend.power_on(container)
                    self._booted()
            elif reset_type == "ForceOff":
                self.backend.force_off(container)
                self._observe("Off")
            elif reset_type in ("ForceRestart", "PowerCycle") or (reset_type == "GracefulRestart" and not on):
                if on:
                    self.backend.force_off(container)
                self.backend.power_on(container)
                self._booted()
            elif reset_type in ("GracefulShutdown", "GracefulRestart"):
                if on:
                    self._start_graceful(reset_type == "GracefulRestart")
            elif reset_type == "Nmi" and not on:
                raise Fail(409, "ActionNotSupported", "Nmi needs a powered-on system.", args=["Nmi"])

    def _start_graceful(self, restart):
        container = self.conf["container"]
        with self._state_lock:
            self._transition, self._cancel = "PoweringOff", False

        def run():
            try:
                self.backend.graceful_shutdown(container)
                self._observe("Off")
                with self._state_lock:
                    go_on = restart and not self._cancel
                    if go_on:
                        self._transition = "PoweringOn"
                if go_on:
                    self.backend.power_on(container)
                    self._booted()
            except BackendError as exc:
                self.last_error = str(exc)
                if self.log:
                    self.log("%s graceful %s failed: %s" % (self.name, "restart" if restart else "shutdown", exc))
            finally:
                with self._state_lock:
                    self._transition = None

        self._worker = threading.Thread(target=run, name="bmc-%s-graceful" % self.name, daemon=True)
        self._worker.start()

    def wait_idle(self, timeout=None):
        """Wait for a graceful shutdown/restart in flight (tests and service stop)."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)

    def watts(self, power_state):
        power = self.conf["power"]
        if power_state != "On":
            return round(power["standby_watts"], 1)
        return round(power["idle_watts"] * (1 + 0.03 * math.sin(self.clock() / 7.0)), 1)

    # ------------------------------------------------------------------ resources
    def get_versions(self, **_):
        return Response(200, {"v1": ROOT + "/"})

    def get_root(self, **_):
        body = {
            "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot", "@odata.id": ROOT + "/", "Id": "RootService",
            "Name": "Root Service", "RedfishVersion": "1.17.0", "UUID": self.conf["uuid"], "Vendor": "msa.hpc",
            "Product": "msa-bmc (simulated BMC of %s)" % self.name,
            "Systems": _link(ROOT + "/Systems"), "Chassis": _link(ROOT + "/Chassis"),
            "Managers": _link(ROOT + "/Managers"), "SessionService": _link(ROOT + "/SessionService"),
            "Links": {"Sessions": _link(SESSIONS)},
            "ProtocolFeaturesSupported": {"ExpandQuery": {"ExpandAll": False, "Levels": False, "Links": False,
                                                          "NoLinks": False},
                                          "FilterQuery": False, "SelectQuery": False, "OnlyMemberQuery": False,
                                          "ExcludeQuery": False}}
        if not self.conf["session_service"]:
            del body["SessionService"], body["Links"]
        return Response(200, body)

    def get_odata(self, **_):
        names = ("Systems", "Chassis", "Managers", "SessionService")
        return Response(200, {"@odata.context": ROOT + "/$metadata", "value": [
            {"name": n, "kind": "Singleton", "url": "%s/%s" % (ROOT, n)} for n in names]})

    def get_systems(self, **_):
        return Response(200, _collection("ComputerSystemCollection", ROOT + "/Systems", "Computer System Collection",
                                         [self.sys_path]))

    def system_body(self):
        conf, row = self.conf, self.store.system(self.name)
        try:
            state = self.power_state()
            status = {"State": "Enabled" if state == "On" else "StandbyOffline", "Health": "OK", "HealthRollup": "OK"}
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
            "BiosVersion": conf["bios_version"], "PowerState": state, "LastResetTime": _iso(row["last_reset"]),
            "Status": status,
            "Boot": {"BootSourceOverrideEnabled": row["boot_enabled"],
                     "BootSourceOverrideEnabled@Redfish.AllowableValues": list(BOOT_ENABLED),
                     "BootSourceOverrideTarget": row["boot_target"],
                     "BootSourceOverrideTarget@Redfish.AllowableValues": list(conf["boot_targets"]),
                     "BootSourceOverrideMode": row["boot_mode"],
                     "BootSourceOverrideMode@Redfish.AllowableValues": list(BOOT_MODES)},
            "ProcessorSummary": {"Count": cpus["count"], "CoreCount": cpus["count"] * cpus["cores"],
                                 "LogicalProcessorCount": cpus["count"] * cpus["threads"], "Model": cpus["model"],
                                 "Status": {"State": "Enabled", "Health": "OK"}},
            "MemorySummary": {"TotalSystemMemoryGiB": conf["memory_gib"],
                              "Status": {"State": "Enabled", "Health": "OK"}},
            "Processors": _link(self.sys_path + "/Processors"), "Memory": _link(self.sys_path + "/Memory"),
            "EthernetInterfaces": _link(self.sys_path + "/EthernetInterfaces"),
            "Links": {"Chassis": [_link(self.chassis_path)], "ManagedBy": [_link(self.manager_path)]},
            "Actions": {"#ComputerSystem.Reset": {
                "target": self.sys_path + "/Actions/ComputerSystem.Reset",
                "ResetType@Redfish.AllowableValues": list(conf["reset_types"]),
                "@Redfish.ActionInfo": self.sys_path + "/ResetActionInfo"}},
            "Oem": {"MsaBmc": {"Container": conf["container"], "Boots": row["boots"],
                               "LastBootSourceOverrideTarget": row["last_boot_target"], "BackendError": oem_error}},
        }
        return body

    def get_system(self, **_):
        return Response(200, self.system_body())

    def patch_system(self, who, data, headers, **_):
        self._require(who, "Operator")
        if headers.get("if-match") and headers["if-match"] not in ("*", etag(self.system_body())):
            raise Fail(412, "PreconditionFailed", "The ETag supplied did not match the ETag required to change "
                       "this resource.", "Try the operation again using the appropriate ETag.")
        for key in data:
            if key != "Boot":
                raise Fail(400, "PropertyNotWritable" if key in self.system_body() else "PropertyUnknown",
                           "The property %s is not writable (only Boot is)." % key, args=[key])
        boot = data.get("Boot") or {}
        if not isinstance(boot, dict):
            raise Fail(400, "PropertyValueTypeError", "The value for the property Boot must be an object.")
        allowed = {"BootSourceOverrideEnabled": BOOT_ENABLED, "BootSourceOverrideTarget": self.conf["boot_targets"],
                   "BootSourceOverrideMode": BOOT_MODES}
        for key, value in boot.items():
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
        if boot:
            self.store.update_system(self.name, **{columns[k]: v for k, v in boot.items()})
        return Response(200, self.system_body())

    def post_reset(self, who, data, **_):
        self._require(who, "Operator")
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
        return Response(200, _collection("EthernetInterfaceCollection", self.sys_path + "/EthernetInterfaces",
                                         "Ethernet Interface Collection",
                                         ["%s/EthernetInterfaces/%s" % (self.sys_path, n["id"])
                                          for n in self.conf["nics"]]))

    def get_nic(self, nic, **_):
        found = self._find(self.conf["nics"], "id", nic, "Ethernet interface")
        return Response(200, self._nic(found, self.power_state() == "On"))

    def _cpus(self):
        return ["CPU%d" % (i + 1) for i in range(self.conf["cpus"]["count"])]

    def get_processors(self, **_):
        return Response(200, _collection("ProcessorCollection", self.sys_path + "/Processors", "Processors Collection",
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
        return Response(200, _collection("MemoryCollection", self.sys_path + "/Memory", "Memory Module Collection",
                                         ["%s/Memory/%s" % (self.sys_path, d) for d in self._dimms()]))

    def get_memory(self, dimm, **_):
        if dimm not in self._dimms():
            raise Fail(404, "ResourceMissingAtURI", "There is no memory module %s on this system." % dimm, args=[dimm])
        return Response(200, {"@odata.type": "#Memory.v1_17_0.Memory",
                              "@odata.id": "%s/Memory/%s" % (self.sys_path, dimm), "Id": dimm, "Name": dimm,
                              "CapacityMiB": self.conf["memory_gib"] * 1024 // self.conf["dimms"],
                              "MemoryDeviceType": "DDR4", "MemoryType": "DRAM",
                              "Status": {"State": "Enabled", "Health": "OK"}})

    def get_chassis_collection(self, **_):
        return Response(200, _collection("ChassisCollection", ROOT + "/Chassis", "Chassis Collection",
                                         [self.chassis_path]))

    def get_chassis(self, **_):
        conf = self.conf
        state = self.power_state()
        return Response(200, {"@odata.type": "#Chassis.v1_23_0.Chassis", "@odata.id": self.chassis_path,
                              "Id": conf["chassis_id"], "Name": "Chassis of %s" % conf["hostname"],
                              "ChassisType": "RackMount", "Manufacturer": conf["manufacturer"],
                              "Model": conf["model"], "SerialNumber": conf["serial"], "PowerState": state,
                              "Status": {"State": "Enabled", "Health": "OK"},
                              "Power": _link(self.chassis_path + "/Power"),
                              "Links": {"ComputerSystems": [_link(self.sys_path)],
                                        "ManagedBy": [_link(self.manager_path)]}})

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
                                  "Status": {"State": "Enabled", "Health": "OK"}}]})

    def get_managers(self, **_):
        return Response(200, _collection("ManagerCollection", ROOT + "/Managers", "Manager Collection",
                                         [self.manager_path]))

    def get_manager(self, **_):
        conf = self.conf
        return Response(200, {"@odata.type": "#Manager.v1_19_0.Manager", "@odata.id": self.manager_path,
                              "Id": conf["manager_id"], "Name": "BMC of %s" % conf["hostname"],
                              "ManagerType": "BMC", "FirmwareVersion": conf["firmware_version"],
                              "Model": "msa-bmc", "PowerState": "On", "DateTime": _iso(self.clock()),
                              "DateTimeLocalOffset": "+00:00", "Status": {"State": "Enabled", "Health": "OK"},
                              "Links": {"ManagerForServers": [_link(self.sys_path)],
                                        "ManagerForChassis": [_link(self.chassis_path)]},
                              "Actions": {"#Manager.Reset": {
                                  "target": self.manager_path + "/Actions/Manager.Reset",
                                  "ResetType@Redfish.AllowableValues": ["GracefulRestart", "ForceRestart"]}}})

    def post_manager_reset(self, who, data, **_):
        """A BMC reset ends every session and clears injected faults; the node keeps running."""
        self._require(who, "Administrator")
        if data.get("ResetType", "GracefulRestart") not in ("GracefulRestart", "ForceRestart"):
            raise Fail(400, "ActionParameterValueNotInList", "ResetType %r is not GracefulRestart or ForceRestart."
                       % data.get("ResetType"), args=[data.get("ResetType"), "ResetType"])
        for session in self.store.sessions(self.name):
            self.store.delete_session(self.name, session["id"])
        with self._fault_lock:
            self._faults = []
        return Response(204)

    # ------------------------------------------------------------------ sessions
    def get_session_service(self, **_):
        return Response(200, {"@odata.type": "#SessionService.v1_1_9.SessionService",
                              "@odata.id": ROOT + "/SessionService", "Id": "SessionService",
                              "Name": "Session Service", "ServiceEnabled": True,
                              "SessionTimeout": self._session_timeout(),
                              "Status": {"State": "Enabled", "Health": "OK"}, "Sessions": _link(SESSIONS)})

    def patch_session_service(self, who, data, **_):
        self._require(who, "Administrator")
        for key, value in data.items():
            if key != "SessionTimeout":
                raise Fail(400, "PropertyNotWritable", "The property %s is not writable." % key, args=[key])
            if isinstance(value, bool) or not isinstance(value, int) or not 30 <= value <= 86400:
                raise Fail(400, "PropertyValueOutOfRange", "The value '%s' for the property SessionTimeout is "
                           "not in the supported range of 30 to 86400." % (value,), args=[value, key])
            self.store.update_system(self.name, session_timeout=value)
        return self.get_session_service()

    def _expire(self):
        self.store.expire_sessions(self.name, self.clock() - self._session_timeout())

    def _session_body(self, session):
        return {"@odata.type": "#Session.v1_7_0.Session", "@odata.id": "%s/%s" % (SESSIONS, session["id"]),
                "Id": session["id"], "Name": "User Session", "UserName": session["username"],
                "Password": None, "SessionType": "Redfish", "CreatedTime": _iso(session["created"])}

    def get_sessions(self, **_):
        self._expire()
        return Response(200, _collection("SessionCollection", SESSIONS, "Session Collection",
                                         ["%s/%s" % (SESSIONS, s["id"]) for s in self.store.sessions(self.name)]))

    def post_session(self, data, **_):
        username, password = data.get("UserName"), data.get("Password")
        for key, value in (("UserName", username), ("Password", password)):
            if not isinstance(value, str):
                raise Fail(400, "PropertyMissing", "The property %s is a required property and must be included "
                           "in the request." % key, args=[key])
        user = self._check_password(username, password)
        if user is None:
            raise self._unauthorized("The user name or password is not correct.")
        self._expire()
        token = secrets.token_urlsafe(32)
        now = self.clock()
        session = {"id": secrets.token_hex(8), "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
                   "username": username, "role": user["role"], "created": now, "last_used": now}
        if not self.store.add_session(self.name, session, self.conf["max_sessions"]):
            raise Fail(503, "SessionLimitExceeded", "The session establishment failed due to the number of "
                       "simultaneous sessions exceeding the limit of the implementation (%d)."
                       % self.conf["max_sessions"], "Reduce the number of other sessions before trying to "
                       "establish the session or increase the limit of simultaneous sessions.")
        location = "%s/%s" % (SESSIONS, session["id"])
        return Response(201, self._session_body(session), {"X-Auth-Token": token, "Location": location})

    def _session(self, sid):
        for session in self.store.sessions(self.name):
            if session["id"] == sid:
                return session
        raise Fail(404, "ResourceMissingAtURI", "The session %s does not exist." % sid, args=[sid])

    def get_session(self, sid, **_):
        return Response(200, self._session_body(self._session(sid)))

    def delete_session(self, who, sid, **_):
        session = self._session(sid)
        if session["username"] != who.username:
            self._require(who, "Administrator")
        self.store.delete_session(self.name, sid)
        return Response(204)


def _mask(prefix):
    bits = (0xFFFFFFFF << (32 - prefix)) & 0xFFFFFFFF
    return ".".join(str((bits >> s) & 0xFF) for s in (24, 16, 8, 0))
