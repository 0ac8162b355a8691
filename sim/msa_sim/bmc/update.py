# SPDX-License-Identifier: GPL-3.0-or-later
"""UpdateService ``SimpleUpdate`` of simulated firmware images, FirmwareInventory and the TaskService that tracks
each update (202 + task monitor); versions and tasks persist in the store."""
from __future__ import annotations

import base64
import binascii
import email.parser
import email.policy
import hashlib
import json
import re
import secrets
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request

from msa_sim.bmc import resource as R
from msa_sim.bmc.resource import Fail, Response

UPDATE = R.ROOT + "/UpdateService"
FIRMWARE = UPDATE + "/FirmwareInventory"
SOFTWARE = UPDATE + "/SoftwareInventory"
MONITORS = R.ROOT + "/TaskService/TaskMonitors"
IMAGE_FORMAT = "msa-bmc-firmware/1"
MAX_IMAGE = 16 << 20
PROTOCOLS = ("HTTP", "HTTPS")
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._+-]{0,63}$")


class ImageError(ValueError):
    """A firmware image that cannot be applied; the message says which field is wrong."""


def make_image(component, version, payload=b"simulated firmware"):
    """A simulated firmware image (JSON): what ``SimpleUpdate`` accepts."""
    return json.dumps({"Image": IMAGE_FORMAT, "Component": component, "Version": version,
                       "Payload": base64.b64encode(payload).decode(),
                       "SHA256": hashlib.sha256(payload).hexdigest()}).encode()


def parse_image(raw, components):
    """(component, version, sha256 of the image) of a valid image for one of ``components``."""
    try:
        image = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ImageError("the image is not a %s document (JSON)" % IMAGE_FORMAT) from None
    if not isinstance(image, dict) or image.get("Image") != IMAGE_FORMAT:
        raise ImageError("the image's Image field is %r, expected %r" % (
            image.get("Image") if isinstance(image, dict) else None, IMAGE_FORMAT))
    if image.get("Component") not in components:
        raise ImageError("the image's Component %r is not one of %s" % (image.get("Component"), ", ".join(components)))
    if not isinstance(image.get("Version"), str) or not _VERSION.match(image["Version"]):
        raise ImageError("the image's Version %r is not a version string" % (image.get("Version"),))
    try:
        payload = base64.b64decode(str(image.get("Payload", "")), validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("the image's Payload is not base64") from None
    if hashlib.sha256(payload).hexdigest() != image.get("SHA256"):
        raise ImageError("the image's SHA256 does not match its Payload (corrupt image)")
    return image["Component"], image["Version"], hashlib.sha256(raw).hexdigest()


class UpdateMixin:
    """Firmware components: BMC (the manager) and BIOS (the system), versions from the store over the config."""

    def __init__(self):
        self._task_lock = threading.Lock()

    def update_routes(self):
        u, t = re.escape(UPDATE), re.escape(R.ROOT + "/TaskService")
        return [
            (u, {"GET": (self.get_update_service, "Login")}),
            (u + r"/Actions/UpdateService\.SimpleUpdate", {"POST": (self.post_simple_update, "ConfigureComponents")}),
            (u + r"/upload", {"POST": (self.post_multipart_update, "ConfigureComponents")}),
            (u + r"/SimpleUpdateActionInfo", {"GET": (self.get_simple_update_info, "Login")}),
            (u + r"/FirmwareInventory", {"GET": (self.get_firmware_inventory, "Login")}),
            (u + r"/FirmwareInventory/(?P<fw>[^/]+)", {"GET": (self.get_firmware, "Login")}),
            (u + r"/SoftwareInventory", {"GET": (self.get_software_inventory, "Login")}),
            (t, {"GET": (self.get_task_service, "Login")}),
            (t + r"/Tasks", {"GET": (self.get_tasks, "Login")}),
            (t + r"/Tasks/(?P<tid>[^/]+)", {"GET": (self.get_task, "Login")}),
            (t + r"/TaskMonitors/(?P<tid>[^/]+)", {"GET": (self.get_task_monitor, "Login")}),
        ]

    # ------------------------------------------------------------------ inventory
    def firmware_versions(self):
        stored = self.store.firmware(self.name)
        versions = {"BMC": self.conf["firmware_version"], "BIOS": self.conf["bios_version"]}
        for component, row in stored.items():
            versions[component] = row["version"]
        return versions

    def get_update_service(self, **_):
        return Response(200, {"@odata.type": "#UpdateService.v1_11_0.UpdateService", "@odata.id": UPDATE,
                              "Id": "UpdateService", "Name": "Update Service", "ServiceEnabled": True,
                              "FirmwareInventory": R.link(FIRMWARE), "SoftwareInventory": R.link(SOFTWARE),
                              "MaxImageSizeBytes": MAX_IMAGE, "MultipartHttpPushUri": UPDATE + "/upload",
                              "Actions": {"#UpdateService.SimpleUpdate": {
                                  "target": UPDATE + "/Actions/UpdateService.SimpleUpdate",
                                  "@Redfish.ActionInfo": UPDATE + "/SimpleUpdateActionInfo",
                                  "TransferProtocol@Redfish.AllowableValues": list(PROTOCOLS)}},
                              "Status": {"State": "Enabled", "Health": "OK"}})

    def get_simple_update_info(self, **_):
        return Response(200, {"@odata.type": "#ActionInfo.v1_3_0.ActionInfo",
                              "@odata.id": UPDATE + "/SimpleUpdateActionInfo", "Id": "SimpleUpdateActionInfo",
                              "Name": "SimpleUpdate Action Info", "Parameters": [
                                  {"Name": "ImageURI", "Required": True, "DataType": "String"},
                                  {"Name": "TransferProtocol", "Required": False, "DataType": "String",
                                   "AllowableValues": list(PROTOCOLS)},
                                  {"Name": "Targets", "Required": False, "DataType": "StringArray",
                                   "AllowableValues": ["%s/%s" % (FIRMWARE, c) for c in self.firmware_versions()]},
                                  {"Name": "Username", "Required": False, "DataType": "String"},
                                  {"Name": "Password", "Required": False, "DataType": "String"}]})

    def get_firmware_inventory(self, **_):
        return Response(200, R.collection("SoftwareInventoryCollection", FIRMWARE, "Firmware Inventory",
                                          ["%s/%s" % (FIRMWARE, c) for c in self.firmware_versions()]))

    def get_software_inventory(self, **_):
        return Response(200, R.collection("SoftwareInventoryCollection", SOFTWARE, "Software Inventory", []))

    def get_firmware(self, fw, **_):
        versions = self.firmware_versions()
        if fw not in versions:
            raise R.missing("%s/%s" % (FIRMWARE, fw))
        stored = self.store.firmware(self.name).get(fw) or {}
        target = self.manager_path if fw == "BMC" else self.sys_path
        return Response(200, {"@odata.type": "#SoftwareInventory.v1_9_0.SoftwareInventory",
                              "@odata.id": "%s/%s" % (FIRMWARE, fw), "Id": fw, "Name": "%s firmware" % fw,
                              "Version": versions[fw], "Updateable": True, "Manufacturer": self.conf["manufacturer"],
                              "SoftwareId": "msa-%s" % fw.lower(), "ReleaseDate": R.iso(stored.get("updated")),
                              "RelatedItem": [R.link(target)], "Status": {"State": "Enabled", "Health": "OK"}})

    # ------------------------------------------------------------------ SimpleUpdate
    def post_simple_update(self, data, **_):
        R.check_keys(data, ("ImageURI", "TransferProtocol", "Targets", "Username", "Password",
                            "@Redfish.OperationApplyTime"))
        uri = data.get("ImageURI")
        if not isinstance(uri, str) or not uri:
            raise R.missing_property("ImageURI")
        parsed = urllib.parse.urlsplit(uri)
        protocol = data.get("TransferProtocol") or parsed.scheme.upper()
        if protocol not in PROTOCOLS:
            raise Fail(400, "ActionParameterNotSupported", "The TransferProtocol %s is not supported (%s)."
                       % (protocol, ", ".join(PROTOCOLS)), args=[protocol, "SimpleUpdate"])
        if not parsed.scheme:
            uri = "%s://%s" % (protocol.lower(), uri)
            parsed = urllib.parse.urlsplit(uri)
        if parsed.scheme.upper() != protocol or not parsed.hostname:
            raise Fail(400, "ActionParameterValueFormatError", "The ImageURI %s is not a %s URL." % (uri, protocol),
                       args=[uri, "ImageURI", "SimpleUpdate"])
        if data.get("@Redfish.OperationApplyTime", "Immediate") != "Immediate":
            raise R.value_not_in_list(data["@Redfish.OperationApplyTime"], "@Redfish.OperationApplyTime",
                                      ["Immediate"])
        wanted = self._targets(data.get("Targets") or [])
        credentials = (data.get("Username"), data.get("Password"))
        task = self._new_task("SimpleUpdate of %s" % uri, {"uri": uri, "targets": wanted})
        thread = threading.Thread(target=self._run_update, args=(task, uri, wanted, credentials),
                                  name="bmc-%s-update" % self.name, daemon=True)
        thread.start()
        return self._task_accepted(task)

    def post_multipart_update(self, raw, headers, **_):
        """MultipartHttpPushUri: ``UpdateParameters`` (JSON) and ``UpdateFile`` (the image) as multipart/form-data."""
        ctype = headers.get("content-type") or ""
        if not ctype.lower().startswith("multipart/form-data"):
            raise Fail(415, "UnsupportedMediaType", "The MultipartHttpPushUri takes multipart/form-data, not %s."
                       % (ctype or "no Content-Type"), "Send UpdateParameters and UpdateFile as form parts.",
                       args=[ctype])
        if len(raw) > MAX_IMAGE + 65536:
            raise Fail(413, "PropertyValueOutOfRange", "The upload is larger than "
                       "%d bytes." % MAX_IMAGE, args=[len(raw), "UpdateFile"])
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode("latin-1") + b"\r\n\r\n" + raw)
        parts = {}
        for part in message.iter_parts() if message.is_multipart() else []:
            name = part.get_param("name", header="content-disposition")
            if name:
                parts[name] = part.get_payload(decode=True) or b""
        if "UpdateFile" not in parts:
            raise R.missing_property("UpdateFile")
        try:
            params = json.loads(parts.get("UpdateParameters") or b"{}")
        except ValueError:
            raise Fail(400, "MalformedJSON", "The UpdateParameters part is not valid JSON.") from None
        if not isinstance(params, dict):
            raise R.type_error(params, "UpdateParameters")
        R.check_keys(params, ("Targets", "@Redfish.OperationApplyTime", "Oem", "ForceUpdate"))
        wanted = self._targets(params.get("Targets") or [])
        image = parts["UpdateFile"]
        task = self._new_task("MultipartHTTPPushUpdate (%d bytes)" % len(image), {"targets": wanted})
        thread = threading.Thread(target=self._run_update, args=(task, None, wanted, None, image),
                                  name="bmc-%s-update" % self.name, daemon=True)
        thread.start()
        return self._task_accepted(task)

    def _targets(self, targets):
        components = list(self.firmware_versions())
        if not isinstance(targets, list):
            raise R.type_error(targets, "Targets")
        wanted = []
        for target in targets:
            name = str(target).rstrip("/").rsplit("/", 1)[-1]
            if not str(target).startswith(FIRMWARE + "/") or name not in components:
                raise R.value_not_in_list(target, "Targets", ["%s/%s" % (FIRMWARE, c) for c in components])
            wanted.append(name)
        return wanted

    def _fetch(self, uri, credentials):
        request = urllib.request.Request(uri, headers={"User-Agent": "msa-bmc/1.0"})
        if credentials[0]:
            raw = ("%s:%s" % credentials).encode()
            request.add_header("Authorization", "Basic " + base64.b64encode(raw).decode())
        context = ssl.create_default_context(cafile=self.conf.get("ca_bundle") or None)
        with urllib.request.urlopen(request, timeout=30, context=context) as answer:
            raw = answer.read(MAX_IMAGE + 1)
        if len(raw) > MAX_IMAGE:
            raise ImageError("the image is larger than %d bytes" % MAX_IMAGE)
        return raw

    def _run_update(self, task, uri, wanted, credentials, raw=None):
        try:
            if raw is None:
                host = urllib.parse.urlsplit(uri).hostname
                if not self.allowed_destination(host):
                    raise ImageError("%s is outside outbound_networks %s" % (host, self.conf["outbound_networks"]))
                raw = self._fetch(uri, credentials)
            self._task_progress(task, 40)
            component, version, digest = parse_image(raw, wanted or list(self.firmware_versions()))
            self._sleep(self.conf["update_seconds"] / 2)
            self._task_progress(task, 80)
            self._sleep(self.conf["update_seconds"] / 2)
            self.store.set_firmware(self.name, component, version, self.clock(), digest)
            self._task_finish(task, "Completed", "OK", "Update.1.0.UpdateSuccessful",
                              "Successfully updated %s to version %s." % (component, version),
                              [component, version])
        except (ImageError, OSError, urllib.error.URLError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            self._task_finish(task, "Exception", "Critical", "Update.1.0.TransferFailed",
                              "Transfer of image '%s' failed: %s" % (uri or "(upload)", reason),
                              [uri or "(upload)", str(reason)])

    def _sleep(self, seconds):
        if seconds > 0:
            threading.Event().wait(seconds)

    # ------------------------------------------------------------------ tasks
    def _new_task(self, name, payload):
        task = {"id": secrets.token_hex(4), "name": name, "state": "Running", "status": "OK", "percent": 0,
                "start": self.clock(), "end_time": None, "messages": "[]", "payload": json.dumps(payload)}
        with self._task_lock:
            self.store.put_task(self.name, task)
        return task

    def _task_progress(self, task, percent):
        with self._task_lock:
            task["percent"] = percent
            self.store.put_task(self.name, task)

    def _task_finish(self, task, state, status, message_id, message, args):
        with self._task_lock:
            task.update(state=state, status=status, percent=100 if state == "Completed" else task["percent"],
                        end_time=self.clock(), messages=json.dumps([{
                            "@odata.type": "#Message.v1_1_1.Message", "MessageId": message_id, "Message": message,
                            "MessageArgs": args, "Severity": status}]))
            self.store.put_task(self.name, task)
        if self.log:
            self.log("%s task %s %s: %s" % (self.name, task["id"], state, message))

    def _task(self, tid):
        for task in self.store.tasks(self.name):
            if task["id"] == tid:
                return task
        raise R.missing("%s/%s" % (R.TASKS, tid))

    def _task_body(self, task):
        body = {"@odata.type": "#Task.v1_7_1.Task", "@odata.id": "%s/%s" % (R.TASKS, task["id"]), "Id": task["id"],
                "Name": task["name"], "TaskState": task["state"], "TaskStatus": task["status"],
                "PercentComplete": task["percent"], "StartTime": R.iso(task["start"]),
                "TaskMonitor": "%s/%s" % (MONITORS, task["id"]), "Messages": json.loads(task["messages"])}
        if task["end_time"] is not None:
            body["EndTime"] = R.iso(task["end_time"])
        return body

    def _task_accepted(self, task):
        monitor = "%s/%s" % (MONITORS, task["id"])
        return Response(202, self._task_body(task), {"Location": monitor, "Retry-After": "1"})

    def get_task_service(self, **_):
        return Response(200, {"@odata.type": "#TaskService.v1_2_0.TaskService", "@odata.id": R.ROOT + "/TaskService",
                              "Id": "TaskService", "Name": "Task Service", "ServiceEnabled": True,
                              "CompletedTaskOverWritePolicy": "Oldest", "LifeCycleEventOnTaskStateChange": False,
                              "DateTime": R.iso(self.clock()), "Tasks": R.link(R.TASKS),
                              "Status": {"State": "Enabled", "Health": "OK"}})

    def get_tasks(self, **_):
        return Response(200, R.collection("TaskCollection", R.TASKS, "Task Collection",
                                          ["%s/%s" % (R.TASKS, t["id"]) for t in self.store.tasks(self.name)]))

    def get_task(self, tid, **_):
        return Response(200, self._task_body(self._task(tid)))

    def get_task_monitor(self, tid, **_):
        """202 with the task while it runs (DSP0266 asynchronous operations), then the finished task."""
        task = self._task(tid)
        if task["end_time"] is None:
            return self._task_accepted(task)
        return Response(200, self._task_body(task))
