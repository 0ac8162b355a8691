# SPDX-License-Identifier: GPL-3.0-or-later
"""Redfish client layer over RestClient: sessions, system discovery, power and boot plans, inventory facts."""
from __future__ import annotations

import time

from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient, RestError, send_again

SERVICE_ROOT = "/redfish/v1/"
POWER_STATES = ("on", "off", "graceful_shutdown", "graceful_restart", "force_restart", "power_cycle")
RESTARTS = ("graceful_restart", "force_restart", "power_cycle")
BOOT_MODES = {"once": "Once", "continuous": "Continuous", "disabled": "Disabled"}
TRANSITIONAL = ("PoweringOn", "PoweringOff")
# What a reset leaves behind, for telling after a lost answer whether it happened (restarts: LastResetTime).
RESETS_TO_ON = ("On", "ForceOn")
RESETS_TO_OFF = ("ForceOff", "GracefulShutdown")
# Reset sequences in order of preference: the first one the BMC allows is used.
RESET_PREFERENCES = {
    "on": (("On",), ("PushPowerButton",)),
    "off": (("ForceOff",),),
    "graceful_shutdown": (("GracefulShutdown",),),
    "graceful_restart": (("GracefulRestart",),),
    "force_restart": (("ForceRestart",), ("ForceOff", "On")),
    "power_cycle": (("PowerCycle",), ("ForceOff", "On")),
}


def argument_spec():
    """Options every Redfish module shares (documented in the msa.hpc.redfish doc fragment)."""
    return dict(
        endpoint=dict(type="str", required=True, aliases=["baseuri"]),
        username=dict(type="str", required=True, aliases=["user"]),
        password=dict(type="str", required=True, no_log=True),
        auth=dict(type="str", default="session", choices=["session", "basic"]),
        validate_certs=dict(type="bool", default=True),
        ca_path=dict(type="path"),
        timeout=dict(type="int", default=10),
        retries=dict(type="int", default=3),
    )


class RedfishError(Exception):
    """A Redfish operation that cannot be done; the message names the option and value at fault."""


def _header(headers, name):
    for key, value in (headers or {}).items():
        if key.lower() == name.lower():
            return value
    return None


def _odata_id(obj, *keys):
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj.get("@odata.id") if isinstance(obj, dict) else None


class Redfish:
    """One BMC: log in (a session, or basic auth when the BMC has no SessionService), operate, log out.

    Use it as a context manager so the session is deleted whatever happens in between.
    """

    def __init__(self, endpoint, username, password, auth="session", validate_certs=True, ca_path=None,
                 timeout=10, retries=3, backoff=0.5, sleep=time.sleep, clock=time.monotonic, rest=None):
        if auth not in ("session", "basic"):
            raise RedfishError("auth: %r is not session or basic" % (auth,))
        try:
            self.rest = rest or RestClient(endpoint, validate_certs=validate_certs, ca_path=ca_path,
                                           timeout=timeout, retries=retries, backoff=backoff, sleep=sleep)
        except RestError as exc:
            raise RedfishError("endpoint: %s" % exc) from None
        self.endpoint = endpoint
        self.username = username
        self.password = password
        self.auth_requested = auth
        self.auth = None
        self.session_uri = None
        self.root = None
        self.warnings = []
        self._sleep = sleep
        self._clock = clock

    # ------------------------------------------------------------------ sessions
    def __enter__(self):
        self.login()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.logout()
        return False

    def _use_basic(self):
        self.rest.username, self.rest.password = self.username, self.password
        self.auth = "basic"

    def login(self):
        try:
            self.root = self.rest.get(SERVICE_ROOT) or {}
        except RestError as exc:
            if exc.status != 401:
                raise
            # Some BMCs refuse even the service root without credentials.
            self._use_basic()
            self.root = self.rest.get(SERVICE_ROOT) or {}
        sessions = _odata_id(self.root, "Links", "Sessions")
        if sessions is None and _odata_id(self.root, "SessionService"):
            sessions = SERVICE_ROOT + "SessionService/Sessions"
        if self.auth_requested == "basic" or sessions is None:
            if self.auth_requested == "session":
                self.warnings.append("the BMC at %s offers no SessionService; used basic authentication"
                                     % self.endpoint)
            self._use_basic()
            return
        try:
            credentials = {"UserName": self.username, "Password": self.password}
            # A session whose answer was lost cannot be used (its token came only in that answer) and expires after
            # the BMC's SessionTimeout; so one more is asked for.
            dummy, body, headers = self.rest.request("POST", sessions, body=credentials, expect=(200, 201, 204),
                                                     lookup=send_again)
        except RestError as exc:
            if exc.status in (404, 405, 501):
                self.warnings.append("the BMC at %s refused to create a session (HTTP %s); used basic "
                                     "authentication" % (self.endpoint, exc.status))
                self._use_basic()
                return
            raise
        token = _header(headers, "X-Auth-Token")
        if not token:
            raise RedfishError("the BMC at %s created a session without an X-Auth-Token header" % self.endpoint)
        self.session_uri = _header(headers, "Location") or (body or {}).get("@odata.id")
        self.rest.username = self.rest.password = None
        self.rest.token, self.rest.token_header = token, "X-Auth-Token"
        self.auth = "session"

    def logout(self):
        """Delete our session; a failure is a warning, since the work itself is done."""
        if self.session_uri is None:
            return
        uri, self.session_uri = self.session_uri, None
        try:
            self.rest.delete(uri)
        except RestError as exc:
            self.warnings.append("logging out of the BMC at %s failed (the session times out on its own): %s"
                                 % (self.endpoint, exc))
        finally:
            self.rest.token = None

    # ------------------------------------------------------------------ systems
    def find_system(self, system_id=None):
        """Return ``(uri, resource, etag)`` of the one system, or of ``system_id``."""
        collection = _odata_id(self.root, "Systems")
        if collection is None:
            raise RedfishError("the BMC at %s lists no Systems collection in its service root" % self.endpoint)
        members = [m.get("@odata.id") for m in (self.rest.get(collection) or {}).get("Members", [])]
        if not members:
            raise RedfishError("the BMC at %s manages no system" % self.endpoint)
        if system_id is None:
            if len(members) > 1:
                ids = ", ".join(m.rstrip("/").rsplit("/", 1)[-1] for m in members)
                raise RedfishError("system_id: the BMC at %s manages %d systems (%s); name one"
                                   % (self.endpoint, len(members), ids))
            return self.get_system(members[0])
        for uri in members:
            if uri.rstrip("/").rsplit("/", 1)[-1] == system_id:
                return self.get_system(uri)
        for uri in members:
            found = self.get_system(uri)
            if found[1].get("Id") == system_id:
                return found
        raise RedfishError("system_id: %r is not a system of the BMC at %s (it has %s)"
                           % (system_id, self.endpoint, ", ".join(members)))

    def get_system(self, uri):
        dummy, body, headers = self.rest.request("GET", uri)
        return uri, body or {}, _header(headers, "ETag")

    def allowed_resets(self, system):
        action = (system.get("Actions") or {}).get("#ComputerSystem.Reset")
        if not action:
            raise RedfishError("the BMC at %s offers no #ComputerSystem.Reset action" % self.endpoint)
        allowed = action.get("ResetType@Redfish.AllowableValues")
        if allowed is None and action.get("@Redfish.ActionInfo"):
            info = self.rest.get(action["@Redfish.ActionInfo"]) or {}
            for param in info.get("Parameters", []):
                if param.get("Name") == "ResetType":
                    allowed = param.get("AllowableValues")
        return allowed

    def reset(self, system, reset_type, uri=None):
        """Send one ComputerSystem.Reset; with the system's ``uri``, one whose answer was lost is not repeated
        when the system shows it happened."""
        target = system["Actions"]["#ComputerSystem.Reset"]["target"]
        lookup = (lambda: self._reset_seen(uri, reset_type, system)) if uri else None
        self.rest.request("POST", target, body={"ResetType": reset_type}, expect=(200, 202, 204), lookup=lookup)

    def _reset_seen(self, uri, reset_type, before):
        """The system if it shows ``reset_type`` happened since ``before`` was read, None if it shows it did not."""
        now = self.get_system(uri)[1]
        state = now.get("PowerState")
        if reset_type in RESETS_TO_ON:
            return now if state in ("On", "PoweringOn") else None
        if reset_type in RESETS_TO_OFF:
            return now if state in ("Off", "PoweringOff") else None
        if before.get("LastResetTime") and now.get("LastResetTime"):
            moved = now["LastResetTime"] != before["LastResetTime"] or state in TRANSITIONAL
            return now if moved else None
        if reset_type == "PushPowerButton":
            return now if state != before.get("PowerState") else None
        raise RestError("the BMC at %s shows no LastResetTime, so whether the %s reset was carried out cannot be "
                        "told; check the node before trying again" % (self.endpoint, reset_type))

    def wait_power(self, uri, target, timeout, last_reset=None, poll=1.0):
        """Poll until PowerState is ``target`` (and, after a restart, LastResetTime moved on)."""
        deadline = self._clock() + timeout
        while True:
            found = self.get_system(uri)
            system = found[1]
            moved = last_reset is None or system.get("LastResetTime") != last_reset
            if system.get("PowerState") == target and moved:
                return found
            if self._clock() >= deadline:
                raise RedfishError("wait_timeout: the system did not reach PowerState %s within %ss (it is %s)"
                                   % (target, timeout, system.get("PowerState")))
            self._sleep(poll)

    def settle(self, uri, found, timeout, poll=1.0):
        """Wait out PoweringOn/PoweringOff, so a decision is taken on a stable state."""
        deadline = self._clock() + timeout
        while found[1].get("PowerState") in TRANSITIONAL and self._clock() < deadline:
            self._sleep(poll)
            found = self.get_system(uri)
        return found

    def patch_boot(self, uri, patch, etag=None):
        headers = {"If-Match": etag} if etag else None
        try:
            self.rest.request("PATCH", uri, body={"Boot": patch}, headers=headers,
                              lookup=lambda: self._boot_seen(uri, patch))
        except RestError as exc:
            if exc.status != 412:
                raise
            etag = self.get_system(uri)[2]
            self.rest.request("PATCH", uri, body={"Boot": patch}, headers={"If-Match": etag} if etag else None,
                              lookup=lambda: self._boot_seen(uri, patch))

    def _boot_seen(self, uri, patch):
        """The system's Boot if it already holds ``patch`` (a PATCH whose answer was lost did happen), else None."""
        boot = self.get_system(uri)[1].get("Boot") or {}
        return boot if all(boot.get(key) == value for key, value in patch.items()) else None

    # ------------------------------------------------------------------ inventory
    def inventory(self, system):
        status = system.get("Status") or {}
        cpus = system.get("ProcessorSummary") or {}
        memory = system.get("MemorySummary") or {}
        facts = {
            "id": system.get("Id"), "manufacturer": system.get("Manufacturer"), "model": system.get("Model"),
            "serial": system.get("SerialNumber"), "uuid": system.get("UUID"), "sku": system.get("SKU"),
            "bios_version": system.get("BiosVersion"), "hostname": system.get("HostName"),
            "power_state": system.get("PowerState"), "last_reset_time": system.get("LastResetTime"),
            "health": status.get("HealthRollup") or status.get("Health"), "state": status.get("State"),
            "cpus": {"count": cpus.get("Count"), "model": cpus.get("Model"), "cores": cpus.get("CoreCount"),
                     "threads": cpus.get("LogicalProcessorCount")},
            "memory_gib": memory.get("TotalSystemMemoryGiB"),
            "boot": boot_facts(system), "nics": [], "power_consumed_watts": None,
        }
        if facts["cpus"]["model"] is None and _odata_id(system, "Processors"):
            for member in (self.rest.get(_odata_id(system, "Processors")) or {}).get("Members", []):
                facts["cpus"]["model"] = (self.rest.get(member["@odata.id"]) or {}).get("Model")
                break
        if _odata_id(system, "EthernetInterfaces"):
            for member in (self.rest.get(_odata_id(system, "EthernetInterfaces")) or {}).get("Members", []):
                nic = self.rest.get(member["@odata.id"]) or {}
                facts["nics"].append({"id": nic.get("Id"), "name": nic.get("Name"),
                                      "mac": nic.get("MACAddress") or nic.get("PermanentMACAddress"),
                                      "speed_mbps": nic.get("SpeedMbps"), "link_status": nic.get("LinkStatus")})
        chassis = ((system.get("Links") or {}).get("Chassis") or [{}])[0].get("@odata.id")
        if chassis:
            try:
                power_uri = _odata_id(self.rest.get(chassis) or {}, "Power")
                if power_uri:
                    control = ((self.rest.get(power_uri) or {}).get("PowerControl") or [{}])[0]
                    facts["power_consumed_watts"] = control.get("PowerConsumedWatts")
            except RestError as exc:
                self.warnings.append("no power reading from %s: %s" % (chassis, exc))
        return facts


def boot_facts(system):
    boot = system.get("Boot") or {}
    return {"enabled": boot.get("BootSourceOverrideEnabled"), "target": boot.get("BootSourceOverrideTarget"),
            "mode": boot.get("BootSourceOverrideMode"),
            "allowed_targets": boot.get("BootSourceOverrideTarget@Redfish.AllowableValues")}


def plan_power(state, power_state, allowed):
    """Return ``(reset types to send in order, PowerState to wait for)`` for the requested ``state``.

    ``on``/``off``/``graceful_shutdown`` send nothing when the system is already there; a restart of a
    system that is off powers it on.  ``allowed`` is the BMC's ResetType@Redfish.AllowableValues (None when
    it does not say, then the first choice is used).
    """
    if state is None:
        return [], None
    if state not in POWER_STATES:
        raise RedfishError("state: %r is not one of %s" % (state, ", ".join(POWER_STATES)))
    target = "Off" if state in ("off", "graceful_shutdown") else "On"
    if state in ("on", "off", "graceful_shutdown") and power_state == target:
        return [], target
    choices = (("On",), ("PushPowerButton",)) if state in RESTARTS and power_state == "Off" \
        else RESET_PREFERENCES[state]
    for sequence in choices:
        if allowed is None or all(r in allowed for r in sequence):
            return list(sequence), target
    raise RedfishError("state: %s needs ResetType %s, but the BMC allows only %s"
                       % (state, " or ".join("+".join(s) for s in choices), ", ".join(allowed) or "none"))


def plan_boot(boot, system):
    """Return the Boot properties to PATCH (empty when the override is already as asked)."""
    if not boot:
        return {}
    mode = boot.get("mode") or "once"
    if mode not in BOOT_MODES:
        raise RedfishError("boot.mode: %r is not one of %s" % (mode, ", ".join(BOOT_MODES)))
    enabled = BOOT_MODES[mode]
    current = system.get("Boot") or {}
    if "BootSourceOverrideEnabled" not in current:
        raise RedfishError("the system reports no Boot.BootSourceOverrideEnabled: boot override is not supported")
    patch = {}
    if enabled == "Disabled":
        if current.get("BootSourceOverrideEnabled") != "Disabled":
            patch["BootSourceOverrideEnabled"] = "Disabled"
        return patch
    target = boot.get("target")
    if not target:
        raise RedfishError("boot.target: a boot target is required when boot.mode is %s" % mode)
    allowed = current.get("BootSourceOverrideTarget@Redfish.AllowableValues")
    if allowed:
        exact = [a for a in allowed if a.lower() == str(target).lower()]
        if not exact:
            raise RedfishError("boot.target: %r is not offered by the BMC (allowed: %s)" % (target, ", ".join(allowed)))
        target = exact[0]
    if current.get("BootSourceOverrideEnabled") != enabled or current.get("BootSourceOverrideTarget") != target:
        patch = {"BootSourceOverrideEnabled": enabled, "BootSourceOverrideTarget": target}
    return patch


def _summary(power_state, boot):
    return "power_state: %s\nboot_override: %s %s\n" % (power_state, boot.get("enabled"), boot.get("target"))


def run(params, check_mode=False, sleep=time.sleep, clock=time.monotonic, rest=None, poll=1.0):
    """Everything the redfish_node module does; returns the module result (without ``failed``)."""
    state, boot = params.get("state"), params.get("boot")
    if boot and (boot.get("mode") or "once") != "disabled" and not boot.get("target"):
        raise RedfishError("boot.target: a boot target is required when boot.mode is %s" % (boot.get("mode") or "once"))
    client = Redfish(params["endpoint"], params["username"], params["password"], auth=params.get("auth", "session"),
                     validate_certs=params.get("validate_certs", True), ca_path=params.get("ca_path"),
                     timeout=params.get("timeout", 10), retries=params.get("retries", 3), sleep=sleep, clock=clock,
                     rest=rest)
    wait, wait_timeout = params.get("wait", True), params.get("wait_timeout", 120)
    actions = []
    with client:
        uri, system, etag = client.find_system(params.get("system_id"))
        if state and wait:
            uri, system, etag = client.settle(uri, (uri, system, etag), wait_timeout, poll)
        power_before, boot_before = system.get("PowerState"), boot_facts(system)
        patch = plan_boot(boot, system)
        resets, target = plan_power(state, power_before, client.allowed_resets(system) if state else None)
        if patch:
            actions.append("PATCH Boot %s" % ", ".join("%s=%s" % kv for kv in sorted(patch.items())))
        actions.extend("ComputerSystem.Reset %s" % r for r in resets)
        if check_mode:
            power_after = target if resets else power_before
            boot_after = dict(boot_before)
            for fact, prop in (("enabled", "BootSourceOverrideEnabled"), ("target", "BootSourceOverrideTarget")):
                if prop in patch:
                    boot_after[fact] = patch[prop]
        else:
            if patch:
                client.patch_boot(uri, patch, etag)
            for i, reset_type in enumerate(resets):
                client.reset(system, reset_type, uri)
                if i + 1 < len(resets):
                    client.wait_power(uri, "Off", wait_timeout, poll=poll)
            if resets and wait:
                last_reset = system.get("LastResetTime") if state in RESTARTS and power_before == "On" else None
                uri, system, etag = client.wait_power(uri, target, wait_timeout, last_reset, poll)
            elif actions:
                uri, system, etag = client.get_system(uri)
            power_after, boot_after = system.get("PowerState"), boot_facts(system)
        result = {"changed": bool(actions), "actions": actions, "reset_types": resets,
                  "power_state_before": power_before, "power_state": power_after,
                  "boot_before": boot_before, "boot": boot_after, "system_id": system.get("Id"), "system_uri": uri,
                  "diff": {"before": _summary(power_before, boot_before), "after": _summary(power_after, boot_after)}}
        if params.get("gather_facts"):
            result["inventory"] = client.inventory(system)
    result["auth"] = client.auth
    if client.warnings:
        result["warnings"] = list(client.warnings)
    return result
