# SPDX-License-Identifier: GPL-3.0-or-later
"""EventService of one BMC: subscriptions (persisted), power-state and health events (ResourceEvent registry)
pushed to each subscriber's Destination over HTTP(S) by a delivery thread, and a watcher that notices power
changes made outside the BMC."""
from __future__ import annotations

import collections
import ipaddress
import json
import queue
import re
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request

from msa_sim.bmc import resource as R
from msa_sim.bmc.backend import BackendError
from msa_sim.bmc.resource import Fail, Response

EVENTS = R.ROOT + "/EventService"
REGISTRY = "ResourceEvent.1.3."
HEALTH = ("OK", "Warning", "Critical")
MAX_SUBSCRIPTIONS = 16
SUBSCRIPTION_KEYS = ("Destination", "Protocol", "Context", "EventTypes", "RegistryPrefixes", "MessageIds",
                     "ResourceTypes", "OriginResources", "HttpHeaders", "SubscriptionType", "EventFormatType",
                     "DeliveryRetryPolicy")
EVENT_TYPES = ("StatusChange", "ResourceUpdated", "ResourceAdded", "ResourceRemoved", "Alert", "Other")
_MESSAGES = {
    "ResourcePoweredOn": ("OK", "The resource '%s' has powered on."),
    "ResourcePoweredOff": ("OK", "The resource '%s' has powered off."),
    "ResourceStatusChangedOK": ("OK", "The health of resource '%s' has changed to OK."),
    "ResourceStatusChangedWarning": ("Warning", "The health of resource '%s' has changed to Warning."),
    "ResourceStatusChangedCritical": ("Critical", "The health of resource '%s' has changed to Critical."),
    "TestMessage": ("OK", "%s"),
}
RETRY_ATTEMPTS, RETRY_SECONDS = 3, 2


class EventsMixin:
    """Events go onto a queue; one thread per BMC delivers them, so a slow listener never blocks a request."""

    def __init__(self):
        self.event_log = collections.deque(maxlen=200)
        self._event_seq = 0
        self._event_lock = threading.Lock()
        self._outbox = queue.Queue()
        self._stop_events = threading.Event()
        self._threads = []
        self.deliveries = []  # (event id, destination, HTTP status or error) of the last deliveries, for tests
        self._backend_down = False

    def event_routes(self):
        e = re.escape(EVENTS)
        return [
            (e, {"GET": (self.get_event_service, "Login"), "PATCH": (self.patch_event_service, "ConfigureManager")}),
            (e + r"/Actions/EventService\.SubmitTestEvent", {"POST": (self.post_test_event, "ConfigureManager")}),
            (e + r"/Subscriptions", {"GET": (self.get_subscriptions, "Login"),
                                     "POST": (self.post_subscription, "ConfigureManager")}),
            (e + r"/Subscriptions/(?P<subid>[^/]+)", {"GET": (self.get_subscription, "Login"),
                                                     "PATCH": (self.patch_subscription, "ConfigureManager"),
                                                     "DELETE": (self.delete_subscription, "ConfigureManager")}),
            (re.escape("/msa-bmc/health"), {"POST": (self.post_health, "ConfigureManager")}),
        ]

    # ------------------------------------------------------------------ lifecycle
    def start_events(self):
        """Start delivering, and watch power changes made outside the BMC (every ``event_poll_seconds``)."""
        self._stop_events.clear()
        for target, name in ((self._deliver_loop, "deliver"), (self._watch_loop, "watch")):
            thread = threading.Thread(target=target, name="bmc-%s-%s" % (self.name, name), daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop_events(self):
        self._stop_events.set()
        self._outbox.put(None)
        for thread in self._threads:
            thread.join(5)
        self._threads = []

    def _watch_loop(self):
        while not self._stop_events.wait(self.conf["event_poll_seconds"]):
            if not self.store.subscriptions(self.name):
                continue  # nobody listens: no podman inspect every second
            try:
                self.power_state()  # _observe emits the event of a change it sees
            except BackendError as exc:
                self._backend_down = True
                self._set_health("Critical", str(exc))
            else:
                if self._backend_down:  # the node answers again: the health the backend cost comes back
                    self._backend_down = False
                    self._set_health("OK", "(power backend answers again)")

    # ------------------------------------------------------------------ producing events
    def power_event(self, state):
        if state in ("On", "Off"):
            self.emit("ResourcePowered" + state, [self.sys_path], self.sys_path)

    def _set_health(self, health, reason=""):
        row = self.store.system(self.name)
        if row["health"] != health:
            self.store.update_system(self.name, health=health)
            self.emit("ResourceStatusChanged" + health, [self.sys_path], self.sys_path)
            if self.log:
                self.log("%s health %s %s" % (self.name, health, reason))

    def emit(self, message, args, origin, severity=None, text=None):
        default_severity, template = _MESSAGES[message]
        with self._event_lock:
            self._event_seq += 1
            event_id = str(self._event_seq)
        event = {"EventId": event_id, "EventTimestamp": R.iso(self.clock()), "Severity": severity or default_severity,
                 "Message": text or template % tuple(args), "MessageId": REGISTRY + message,
                 "MessageArgs": [str(a) for a in args], "OriginOfCondition": R.link(origin),
                 "EventType": "StatusChange" if message != "TestMessage" else "Other"}
        self.event_log.append(event)
        self._outbox.put(event)
        return event

    # ------------------------------------------------------------------ delivery
    def _matches(self, sub, event):
        message_id = event["MessageId"]
        prefix = message_id.split(".", 1)[0]
        if sub.get("RegistryPrefixes") and prefix not in sub["RegistryPrefixes"]:
            return False
        if sub.get("MessageIds") and not any(message_id == m or message_id.endswith("." + m.split(".")[-1])
                                             for m in sub["MessageIds"]):
            return False
        origin = event["OriginOfCondition"]["@odata.id"]
        if sub.get("OriginResources") and origin not in [o.get("@odata.id") for o in sub["OriginResources"]]:
            return False
        if sub.get("ResourceTypes") and "ComputerSystem" not in sub["ResourceTypes"]:
            return False
        if sub.get("EventTypes") and event["EventType"] not in sub["EventTypes"]:
            return False
        return True

    def _deliver_loop(self):
        while True:
            event = self._outbox.get()
            if event is None:
                return
            for sid, sub in self.store.subscriptions(self.name).items():
                if self._matches(sub, event):
                    self._deliver(sid, sub, event)

    def allowed_destination(self, host):
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
        except OSError:
            return False
        networks = [ipaddress.ip_network(n) for n in self.conf["outbound_networks"]]
        return all(any(ipaddress.ip_address(a.split("%")[0]) in n for n in networks) for a in addresses)

    def _deliver(self, sid, sub, event):
        payload = {"@odata.type": "#Event.v1_8_0.Event", "Id": event["EventId"], "Name": "Event Array",
                   "Context": sub.get("Context") or "", "Events": [dict(event, MemberId="0")]}
        destination = sub["Destination"]
        host = urllib.parse.urlsplit(destination).hostname
        if not self.allowed_destination(host):
            self._record(event, destination, "refused: %s is outside outbound_networks" % host)
            return
        data = json.dumps(payload).encode()
        headers = dict(sub.get("_headers") or {}, **{"Content-Type": "application/json",
                                                     "User-Agent": "msa-bmc/1.0", "OData-Version": "4.0"})
        context = ssl.create_default_context(cafile=self.conf.get("ca_bundle") or None)
        outcome = None
        for attempt in range(RETRY_ATTEMPTS):
            request = urllib.request.Request(destination, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=5, context=context) as answer:
                    outcome = answer.status
                    break
            except urllib.error.HTTPError as exc:
                outcome = exc.code
            except (OSError, urllib.error.URLError) as exc:
                outcome = "error: %s" % (getattr(exc, "reason", None) or exc)
            if attempt + 1 < RETRY_ATTEMPTS and self._stop_events.wait(RETRY_SECONDS):
                break
        self._record(event, destination, outcome)

    def _record(self, event, destination, outcome):
        self.deliveries = (self.deliveries + [(event["EventId"], destination, outcome)])[-50:]
        if self.log:
            self.log("%s event %s %s to %s: %s" % (self.name, event["EventId"], event["MessageId"], destination,
                                                  outcome))

    # ------------------------------------------------------------------ resources
    def get_event_service(self, **_):
        return Response(200, {"@odata.type": "#EventService.v1_10_0.EventService", "@odata.id": EVENTS,
                              "Id": "EventService", "Name": "Event Service", "ServiceEnabled": True,
                              "DeliveryRetryAttempts": RETRY_ATTEMPTS,
                              "DeliveryRetryIntervalSeconds": RETRY_SECONDS,
                              "EventFormatTypes": ["Event"], "RegistryPrefixes": ["ResourceEvent"],
                              "ResourceTypes": ["ComputerSystem"], "SubordinateResourcesSupported": False,
                              "Subscriptions": R.link(R.SUBSCRIPTIONS),
                              "Actions": {"#EventService.SubmitTestEvent": {
                                  "target": EVENTS + "/Actions/EventService.SubmitTestEvent"}},
                              "Status": {"State": "Enabled", "Health": "OK"}})

    def patch_event_service(self, data, **_):
        R.check_keys(data, ("ServiceEnabled",))
        if data.get("ServiceEnabled", True) is not True:
            raise Fail(400, "PropertyValueIncorrect", "The event service cannot be disabled here.",
                       args=[data["ServiceEnabled"], "ServiceEnabled"])
        return self.get_event_service()

    def post_test_event(self, data, **_):
        R.check_keys(data, ("EventType", "EventId", "EventTimestamp", "Message", "MessageArgs", "MessageId",
                            "OriginOfCondition", "Severity", "EventGroupId"))
        severity = data.get("Severity", "OK")
        if severity not in HEALTH:
            raise R.value_not_in_list(severity, "Severity", HEALTH)
        self.emit("TestMessage", [str(data.get("Message") or "Test event")], self.manager_path, severity=severity)
        return Response(204)

    def _subscription_body(self, sid, sub):
        body = {k: v for k, v in sub.items() if not k.startswith("_")}
        body.update({"@odata.type": "#EventDestination.v1_13_1.EventDestination",
                     "@odata.id": "%s/%s" % (R.SUBSCRIPTIONS, sid), "Id": sid, "Name": "Event Subscription %s" % sid,
                     "HttpHeaders": [], "Status": {"State": "Enabled", "Health": "OK"}})
        return body

    def get_subscriptions(self, **_):
        return Response(200, R.collection("EventDestinationCollection", R.SUBSCRIPTIONS, "Event Subscriptions",
                                          ["%s/%s" % (R.SUBSCRIPTIONS, s) for s in self.store.subscriptions(self.name)]))

    def _validate_subscription(self, data):
        R.check_keys(data, SUBSCRIPTION_KEYS)
        destination = data.get("Destination")
        if not isinstance(destination, str):
            raise R.missing_property("Destination")
        parts = urllib.parse.urlsplit(destination)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise Fail(400, "PropertyValueFormatError", "The value '%s' for the property Destination is not an "
                       "http or https URL." % destination, args=[destination, "Destination"])
        if data.get("Protocol", "Redfish") != "Redfish":
            raise R.value_not_in_list(data["Protocol"], "Protocol", ["Redfish"])
        for key, allowed in (("SubscriptionType", ("RedfishEvent",)), ("EventFormatType", ("Event",)),
                             ("DeliveryRetryPolicy", ("RetryForever", "TerminateAfterRetries",
                                                      "SuspendRetries", "RetryForeverWithBackoff"))):
            if key in data and data[key] not in allowed:
                raise R.value_not_in_list(data[key], key, allowed)
        for key in ("EventTypes", "RegistryPrefixes", "MessageIds", "ResourceTypes"):
            if key in data and (not isinstance(data[key], list) or not all(isinstance(v, str) for v in data[key])):
                raise R.type_error(data[key], key)
        for value in data.get("EventTypes") or []:
            if value not in EVENT_TYPES:
                raise R.value_not_in_list(value, "EventTypes", EVENT_TYPES)
        if "OriginResources" in data and (not isinstance(data["OriginResources"], list) or not all(
                isinstance(o, dict) and isinstance(o.get("@odata.id"), str) for o in data["OriginResources"])):
            raise R.type_error(data["OriginResources"], "OriginResources")
        headers = data.get("HttpHeaders") or []
        if not isinstance(headers, list) or not all(isinstance(h, dict) and all(
                isinstance(k, str) and isinstance(v, str) and "\n" not in k + v and "\r" not in k + v
                for k, v in h.items()) for h in headers):
            raise R.type_error("(hidden)", "HttpHeaders")
        if not isinstance(data.get("Context", ""), str):
            raise R.type_error(data["Context"], "Context")

    def post_subscription(self, data, **_):
        self._validate_subscription(data)
        sub = {k: v for k, v in data.items() if k != "HttpHeaders"}
        sub.setdefault("Protocol", "Redfish")
        sub.setdefault("Context", "")
        sub.setdefault("SubscriptionType", "RedfishEvent")
        sub.setdefault("EventFormatType", "Event")
        sub.setdefault("DeliveryRetryPolicy", "TerminateAfterRetries")
        # HttpHeaders are write-only (they often carry the listener's credentials): kept, never shown
        sub["_headers"] = {k: v for h in data.get("HttpHeaders") or [] for k, v in h.items()}
        sid = self.store.add_subscription(self.name, sub, MAX_SUBSCRIPTIONS)
        if sid is None:
            raise Fail(400, "CreateLimitReachedForResource", "The create operation failed because the resource "
                       "has reached the limit of possible resources (%d subscriptions)." % MAX_SUBSCRIPTIONS,
                       "Delete a subscription and resubmit the request.")
        body = self._subscription_body(sid, self.store.subscriptions(self.name)[sid])
        return Response(201, body, {"Location": body["@odata.id"]})

    def _subscription(self, subid):
        subs = self.store.subscriptions(self.name)
        if subid not in subs:
            raise R.missing("%s/%s" % (R.SUBSCRIPTIONS, subid))
        return subs[subid]

    def get_subscription(self, subid, **_):
        return Response(200, self._subscription_body(subid, self._subscription(subid)))

    def patch_subscription(self, subid, data, **_):
        sub = self._subscription(subid)
        for key in data:
            if key not in ("Context", "DeliveryRetryPolicy", "HttpHeaders"):
                raise R.not_writable(key) if key in SUBSCRIPTION_KEYS else R.unknown_property(key)
        self._validate_subscription(dict({"Destination": sub["Destination"]}, **data))
        if "HttpHeaders" in data:
            sub["_headers"] = {k: v for h in data["HttpHeaders"] for k, v in h.items()}
        sub.update({k: v for k, v in data.items() if k != "HttpHeaders"})
        self.store.update_subscription(self.name, subid, sub)
        return self.get_subscription(subid)

    def delete_subscription(self, subid, **_):
        self._subscription(subid)
        self.store.delete_subscription(self.name, subid)
        return Response(204)

    def post_health(self, data, **_):
        """Simulation control (Administrator): a sensor fault sets the system's health, as hardware would."""
        R.check_keys(data, ("Health",))
        if data.get("Health") not in HEALTH:
            raise R.value_not_in_list(data.get("Health"), "Health", HEALTH)
        self._set_health(data["Health"], "(set through /msa-bmc/health)")
        return Response(204)
