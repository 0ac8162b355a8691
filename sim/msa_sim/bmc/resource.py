# SPDX-License-Identifier: GPL-3.0-or-later
"""Redfish protocol pieces every BMC resource module shares: answers, errors in the Base registry format, links."""
from __future__ import annotations

import datetime
import hashlib
import json

ROOT = "/redfish/v1"
SESSIONS = ROOT + "/SessionService/Sessions"
ACCOUNTS = ROOT + "/AccountService/Accounts"
ROLES_URI = ROOT + "/AccountService/Roles"
TASKS = ROOT + "/TaskService/Tasks"
SUBSCRIPTIONS = ROOT + "/EventService/Subscriptions"
FAULTS = "/msa-bmc/faults"
BASE = "Base.1.16."
SCHEMAS = "http://redfish.dmtf.org/schemas/v1/"

# DSP0266 privileges and the predefined roles (Redfish privilege registry, "Roles" section).
# OperateSystems (Privileges 2022.2: "able to perform resets") is what the service's own SystemResetOperator role
# holds beside Login: the account a node's RebootProgram uses may reset that system, and change nothing else (not
# even its own password: no ConfigureSelf), so root on a node cannot turn its BMC credential into more.
PRIVILEGES = ("Login", "ConfigureManager", "ConfigureUsers", "ConfigureComponents", "ConfigureSelf", "OperateSystems")
ROLE_PRIVILEGES = {
    "Administrator": ["Login", "ConfigureManager", "ConfigureUsers", "ConfigureComponents", "ConfigureSelf"],
    "Operator": ["Login", "ConfigureComponents", "ConfigureSelf"],
    "ReadOnly": ["Login", "ConfigureSelf"],
    "SystemResetOperator": ["Login", "OperateSystems"],
    "MsaReimageOperator": ["Login", "OperateSystems"],
}
# OEM privileges (DSP0266: a role's OemPrivileges). MsaBootOverride lets an account set this system's one-time boot
# override (Boot.BootSourceOverrideEnabled/Target/HttpBootUri) and nothing else: ConfigureComponents, which a PATCH of
# the system needs otherwise, would also open BIOS, Secure Boot, volumes and firmware. MsaReimageOperator is the
# vendor role for a node's own account when the node may boot a new image of itself (issue 38): reset plus that.
OEM_PRIVILEGES = ("MsaBootOverride",)
ROLE_OEM_PRIVILEGES = {"MsaReimageOperator": ["MsaBootOverride"]}


class Response:
    """One answer: JSON ``body`` (a dict) or raw ``data`` bytes of ``content_type``."""

    def __init__(self, status, body=None, headers=None, data=None, content_type=None):
        self.status = status
        self.body = body
        self.data = data
        self.content_type = content_type
        self.headers = dict(headers or {})

    def payload(self):
        if self.data is not None:
            return self.data
        if self.body is None:
            return b""
        return json.dumps(self.body, indent=1).encode()


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


def missing(path):
    return Fail(404, "ResourceMissingAtURI", "The resource at the URI %s was not found." % path,
                "Place a valid resource at the URI or correct the URI and resubmit the request.", args=[path])


def forbidden():
    return Fail(403, "InsufficientPrivilege", "There are insufficient privileges for the account or credentials "
                "associated with the current session to perform the requested operation.",
                "Either abandon the operation or change the associated access rights and resubmit the request if "
                "the operation failed.")


def not_writable(key):
    return Fail(400, "PropertyNotWritable", "The property %s is a read only property and cannot be assigned a "
                "value." % key, "Remove the property from the request body and resubmit the request if the "
                "operation failed.", args=[key])


def unknown_property(key):
    return Fail(400, "PropertyUnknown", "The property %s is not in the list of valid properties for the "
                "resource." % key, "Remove the unknown property from the request body and resubmit the request "
                "if the operation failed.", args=[key])


def value_not_in_list(value, key, allowed):
    return Fail(400, "PropertyValueNotInList", "The value '%s' for the property %s is not in the list of "
                "acceptable values (%s)." % (value, key, ", ".join(allowed)),
                "Choose a value from the enumeration list that the implementation can support and resubmit the "
                "request if the operation failed.", args=[value, key])


def type_error(value, key):
    return Fail(400, "PropertyValueTypeError", "The value '%s' for the property %s is not a type that the "
                "property can accept." % (value, key), "Correct the value for the property in the request body "
                "and resubmit the request if the operation failed.", args=[value, key])


def missing_property(key):
    return Fail(400, "PropertyMissing", "The property %s is a required property and must be included in the "
                "request." % key, "Ensure that the property is in the request body and has a valid value and "
                "resubmit the request if the operation failed.", args=[key])


def iso(ts):
    if ts is None:
        return None
    # milliseconds, so two resets within one second still differ (clients wait for LastResetTime to move)
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+00:00"


def link(path):
    return {"@odata.id": path}


def collection(odata_type, path, name, members):
    return {"@odata.type": "#%s.%s" % (odata_type, odata_type), "@odata.id": path, "Name": name,
            "Members": [link(m) for m in members], "Members@odata.count": len(members)}


VOLATILE = ("@odata.etag", "DateTime")  # a clock is not a change of the resource (If-Match must still match)


def etag(body):
    clean = {k: v for k, v in body.items() if k not in VOLATILE}
    return 'W/"%s"' % hashlib.sha1(json.dumps(clean, sort_keys=True).encode()).hexdigest()[:16]


def schema_of(body):
    """``ComputerSystem.v1_20_0`` from a body's ``@odata.type``, or None."""
    odata_type = body.get("@odata.type") if isinstance(body, dict) else None
    if not odata_type:
        return None
    return odata_type.lstrip("#").rsplit(".", 1)[0]


def check_keys(data, writable):
    """Refuse a PATCH naming a property outside ``writable`` (read-only ones and unknown ones told apart)."""
    for key in data:
        if key.startswith("@odata."):
            raise Fail(400, "NoOperation", "The request body contains the OData annotation %s, which cannot be "
                       "written." % key, "Remove the annotation and resubmit the request.", args=[key])
        if key not in writable:
            raise unknown_property(key)


class Principal:
    def __init__(self, username, role, session=None):
        self.username = username
        self.role = role
        self.session = session

    @property
    def privileges(self):
        return ROLE_PRIVILEGES.get(self.role, []) + ROLE_OEM_PRIVILEGES.get(self.role, [])
