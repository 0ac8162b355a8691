# SPDX-License-Identifier: GPL-3.0-or-later
"""AccountService (accounts, the predefined roles, the privilege map) and SessionService of one BMC."""
from __future__ import annotations

import hashlib
import re
import secrets

from msa_sim.bmc import resource as R
from msa_sim.bmc.auth import hash_password
from msa_sim.bmc.resource import Fail, Response

ACCOUNT_SERVICE = R.ROOT + "/AccountService"
PRIVILEGE_MAP = ACCOUNT_SERVICE + "/PrivilegeMap"
MIN_PASSWORD, MAX_PASSWORD = 8, 64
MAX_ACCOUNTS = 32
_USERNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,31}$")
ACCOUNT_WRITABLE = ("UserName", "Password", "RoleId", "Enabled", "Locked", "PasswordChangeRequired")


def _bool(data, key):
    value = data[key]
    if not isinstance(value, bool):
        raise R.type_error(value, key)
    return int(value)


class AccountsMixin:
    """Accounts live in the store (configured ones seeded at start); passwords are kept as PBKDF2 hashes."""

    password_iterations = 100000

    def account_routes(self):
        a, s = re.escape(ACCOUNT_SERVICE), re.escape(R.ROOT + "/SessionService")
        table = [
            (a, {"GET": (self.get_account_service, "Login"), "PATCH": (self.patch_account_service, "ConfigureUsers")}),
            (a + r"/Accounts", {"GET": (self.get_accounts, "Login"), "POST": (self.post_account, "ConfigureUsers")}),
            (a + r"/Accounts/(?P<aid>[^/]+)", {"GET": (self.get_account, "ConfigureSelf"),
                                              "PATCH": (self.patch_account, "ConfigureSelf"),
                                              "DELETE": (self.delete_account, "ConfigureUsers")}),
            (a + r"/Roles", {"GET": (self.get_roles, "Login")}),
            (a + r"/Roles/(?P<role>[^/]+)", {"GET": (self.get_role, "Login")}),
            (a + r"/PrivilegeMap", {"GET": (self.get_privilege_map, "Login")}),
        ]
        if self.conf["session_service"]:
            table += [
                (s, {"GET": (self.get_session_service, "Login"),
                     "PATCH": (self.patch_session_service, "ConfigureManager")}),
                (s + r"/Sessions", {"GET": (self.get_sessions, "Login"), "POST": (self.post_session, None)}),
                (s + r"/Sessions/(?P<sid>[^/]+)", {"GET": (self.get_session, "Login"),
                                                  "DELETE": (self.delete_session, "ConfigureSelf")}),
            ]
        return table

    # ------------------------------------------------------------------ accounts
    def _account_uri(self, username):
        account = self.store.account(self.name, "username", username)
        return "%s/Accounts/%s" % (ACCOUNT_SERVICE, account["id"]) if account else ACCOUNT_SERVICE

    def _must_change_password(self, who):
        account = self.store.account(self.name, "username", who.username)
        return bool(account and account["password_change_required"])

    def get_account_service(self, **_):
        return Response(200, {"@odata.type": "#AccountService.v1_13_0.AccountService", "@odata.id": ACCOUNT_SERVICE,
                              "Id": "AccountService", "Name": "Account Service", "ServiceEnabled": True,
                              "MinPasswordLength": MIN_PASSWORD, "MaxPasswordLength": MAX_PASSWORD,
                              "AuthFailureLoggingThreshold": 3, "AccountLockoutThreshold": 0,
                              "AccountLockoutDuration": 0, "AccountLockoutCounterResetAfter": 0,
                              "LocalAccountAuth": "Enabled",
                              "Accounts": R.link(ACCOUNT_SERVICE + "/Accounts"),
                              "Roles": R.link(ACCOUNT_SERVICE + "/Roles"), "PrivilegeMap": R.link(PRIVILEGE_MAP),
                              "Status": {"State": "Enabled", "Health": "OK"}})

    def patch_account_service(self, data, **_):
        # the policy is fixed; a PATCH that restates it is accepted, any other value is refused by name
        current = self.get_account_service().body
        R.check_keys(data, ("MinPasswordLength", "MaxPasswordLength", "AuthFailureLoggingThreshold",
                            "AccountLockoutThreshold", "AccountLockoutDuration",
                            "AccountLockoutCounterResetAfter", "LocalAccountAuth"))
        for key, value in data.items():
            if value != current[key]:
                raise Fail(400, "PropertyValueIncorrect", "The value '%s' for the property %s is not supported; "
                           "this service's value is %s." % (value, key, current[key]), args=[value, key])
        return Response(200, current)

    def _account_body(self, account):
        return {"@odata.type": "#ManagerAccount.v1_10_0.ManagerAccount",
                "@odata.id": "%s/Accounts/%s" % (ACCOUNT_SERVICE, account["id"]), "Id": account["id"],
                "Name": "User Account", "UserName": account["username"], "Password": None,
                "RoleId": account["role"], "Enabled": bool(account["enabled"]), "Locked": bool(account["locked"]),
                "PasswordChangeRequired": bool(account["password_change_required"]), "AccountTypes": ["Redfish"],
                "Links": {"Role": R.link("%s/%s" % (R.ROLES_URI, account["role"]))}}

    def get_accounts(self, **_):
        return Response(200, R.collection("ManagerAccountCollection", ACCOUNT_SERVICE + "/Accounts", "Accounts",
                                          ["%s/Accounts/%s" % (ACCOUNT_SERVICE, a["id"])
                                           for a in self.store.accounts(self.name)]))

    def _account(self, aid, who=None):
        account = self.store.account(self.name, "id", aid)
        if account is None:
            raise R.missing("%s/Accounts/%s" % (ACCOUNT_SERVICE, aid))
        if who is not None and account["username"] != who.username and "ConfigureUsers" not in who.privileges:
            raise R.forbidden()
        return account

    def get_account(self, aid, who, **_):
        # ConfigureSelf reads one's own account (also while a password change is due); others need ConfigureUsers
        return Response(200, self._account_body(self._account(aid, who)))

    def _password(self, value):
        if not isinstance(value, str):
            raise R.type_error("(hidden)", "Password")
        if not MIN_PASSWORD <= len(value) <= MAX_PASSWORD:
            raise Fail(400, "PropertyValueFormatError", "The password must be %d to %d characters long."
                       % (MIN_PASSWORD, MAX_PASSWORD), "Choose a password of the required length.",
                       args=["(hidden)", "Password"])
        return hash_password(value, iterations=self.password_iterations)

    def _account_values(self, data):
        values = {}
        if "UserName" in data:
            if not isinstance(data["UserName"], str) or not _USERNAME.match(data["UserName"]):
                raise Fail(400, "PropertyValueFormatError", "The value '%s' for the property UserName is not a "
                           "user name (letters, digits, '.', '_', '-'; up to 32)." % (data["UserName"],),
                           args=[data["UserName"], "UserName"])
            values["username"] = data["UserName"]
        if "Password" in data:
            values["password_hash"] = self._password(data["Password"])
        if "RoleId" in data:
            if data["RoleId"] not in R.ROLE_PRIVILEGES:
                raise R.value_not_in_list(data["RoleId"], "RoleId", list(R.ROLE_PRIVILEGES))
            values["role"] = data["RoleId"]
        for key, column in (("Enabled", "enabled"), ("Locked", "locked"),
                            ("PasswordChangeRequired", "password_change_required")):
            if key in data:
                values[column] = _bool(data, key)
        if values.get("locked"):
            raise Fail(400, "PropertyValueIncorrect", "Locked can only be set to false (accounts are locked by "
                       "the service, not by a client).", args=[True, "Locked"])
        return values

    def post_account(self, data, **_):
        R.check_keys(data, ACCOUNT_WRITABLE)
        for key in ("UserName", "Password", "RoleId"):
            if key not in data:
                raise R.missing_property(key)
        values = dict({"enabled": 1, "locked": 0, "password_change_required": 0}, **self._account_values(data))
        aid = self.store.add_account(self.name, values, MAX_ACCOUNTS)
        if aid is None:
            raise Fail(409, "ResourceAlreadyExists", "The account %s already exists." % data["UserName"],
                       "Choose another UserName.", args=["ManagerAccount", "UserName", data["UserName"]])
        if aid is False:
            raise Fail(400, "CreateLimitReachedForResource", "The create operation failed because the resource "
                       "has reached the limit of possible resources (%d accounts)." % MAX_ACCOUNTS,
                       "Either delete resources and resubmit the request if the operation failed or do not "
                       "resubmit the request.")
        body = self._account_body(self._account(aid))
        return Response(201, body, {"Location": body["@odata.id"]})

    def patch_account(self, aid, data, who, **_):
        account = self._account(aid, who)
        R.check_keys(data, ACCOUNT_WRITABLE)
        own_password_only = account["username"] == who.username and set(data) <= {"Password"}
        if not own_password_only:
            self.require(who, "ConfigureUsers")
        values = self._account_values(data)
        if "password_hash" in values and "password_change_required" not in values:
            values["password_change_required"] = 0
        if values and not self.store.update_account(self.name, aid, **values):
            raise Fail(409, "ResourceAlreadyExists", "The account %s already exists." % data.get("UserName"),
                       "Choose another UserName.", args=["ManagerAccount", "UserName", data.get("UserName")])
        if values.get("enabled") == 0 or "role" in values or "password_hash" in values or "username" in values:
            for session in self.store.sessions(self.name):  # old credentials and roles end their sessions
                if session["username"] == account["username"] and (who.session is None or
                                                                   session["id"] != who.session["id"]):
                    self.store.delete_session(self.name, session["id"])
        return Response(200, self._account_body(self._account(aid)))

    def delete_account(self, aid, who, **_):
        account = self._account(aid)
        if account["username"] == who.username:
            raise Fail(400, "ResourceInUse", "An account cannot delete itself.",
                       "Delete the account from another administrator account.")
        self.store.delete_account(self.name, aid)
        return Response(204)

    # ------------------------------------------------------------------ roles and privilege map
    def get_roles(self, **_):
        return Response(200, R.collection("RoleCollection", R.ROLES_URI, "Roles",
                                          ["%s/%s" % (R.ROLES_URI, r) for r in R.ROLE_PRIVILEGES]))

    def get_role(self, role, **_):
        if role not in R.ROLE_PRIVILEGES:
            raise R.missing("%s/%s" % (R.ROLES_URI, role))
        return Response(200, {"@odata.type": "#Role.v1_3_1.Role", "@odata.id": "%s/%s" % (R.ROLES_URI, role),
                              "Id": role, "Name": "%s Role" % role, "RoleId": role, "IsPredefined": True,
                              "Description": "Predefined %s role" % role,
                              "AssignedPrivileges": list(R.ROLE_PRIVILEGES[role]),
                              "OemPrivileges": list(R.ROLE_OEM_PRIVILEGES.get(role, []))})

    def get_privilege_map(self, **_):
        """The operation-to-privilege map this service enforces, read off its own route table."""
        mappings = {}
        for pattern, methods in self._routes:
            body = self._sample_body(pattern, methods)
            if not body:
                continue
            ops = mappings.setdefault(R.schema_of(body).split(".")[0], {})
            for method, (_, privilege) in methods.items():
                alternatives = privilege if isinstance(privilege, tuple) else (privilege or "NoAuth",)
                ops[method] = [{"Privilege": [p]} for p in alternatives]
            ops["HEAD"] = ops["GET"]
        return Response(200, {"@odata.type": "#PrivilegeRegistry.v1_1_4.PrivilegeRegistry",
                              "@odata.id": PRIVILEGE_MAP, "Id": "PrivilegeMap", "Name": "Privilege Map",
                              "PrivilegesUsed": list(R.PRIVILEGES), "OEMPrivilegesUsed": list(R.OEM_PRIVILEGES),
                              "Mappings": [{"Entity": e, "OperationMap": ops} for e, ops in sorted(mappings.items())]})

    def _sample_body(self, pattern, methods):
        """The body a route's GET gives for its first member (None when it has no GET or no member)."""
        if "GET" not in methods or pattern.pattern.endswith("PrivilegeMap$"):
            return None
        samples = {"aid": [a["id"] for a in self.store.accounts(self.name)], "role": list(R.ROLE_PRIVILEGES),
                   "sid": [s["id"] for s in self.store.sessions(self.name)]}
        values = {}
        for group in pattern.groupindex:
            found = samples.get(group) or self.sample_ids(group)
            if not found:
                return None
            values[group] = found[0]
        try:
            body = methods["GET"][0](who=None, data=None, headers={}, **values).body
        except Fail:
            return None
        return body if isinstance(body, dict) and R.schema_of(body) else None

    # ------------------------------------------------------------------ sessions
    def _session_timeout(self):
        return self.store.system(self.name)["session_timeout"] or self.conf["session_timeout"]

    def get_session_service(self, **_):
        return Response(200, {"@odata.type": "#SessionService.v1_1_9.SessionService",
                              "@odata.id": R.ROOT + "/SessionService", "Id": "SessionService",
                              "Name": "Session Service", "ServiceEnabled": True,
                              "SessionTimeout": self._session_timeout(),
                              "Status": {"State": "Enabled", "Health": "OK"}, "Sessions": R.link(R.SESSIONS)})

    def patch_session_service(self, data, **_):
        R.check_keys(data, ("SessionTimeout", "ServiceEnabled"))
        if data.get("ServiceEnabled", True) is not True:
            raise Fail(400, "PropertyValueIncorrect", "The session service cannot be disabled here.",
                       args=[data["ServiceEnabled"], "ServiceEnabled"])
        if "SessionTimeout" in data:
            value = data["SessionTimeout"]
            if isinstance(value, bool) or not isinstance(value, int) or not 30 <= value <= 86400:
                raise Fail(400, "PropertyValueOutOfRange", "The value '%s' for the property SessionTimeout is "
                           "not in the supported range of 30 to 86400." % (value,), args=[value, "SessionTimeout"])
            self.store.update_system(self.name, session_timeout=value)
        return self.get_session_service()

    def _expire(self):
        self.store.expire_sessions(self.name, self.clock() - self._session_timeout())

    def _session_body(self, session):
        return {"@odata.type": "#Session.v1_7_0.Session", "@odata.id": "%s/%s" % (R.SESSIONS, session["id"]),
                "Id": session["id"], "Name": "User Session", "UserName": session["username"],
                "Password": None, "SessionType": "Redfish", "CreatedTime": R.iso(session["created"])}

    def get_sessions(self, **_):
        self._expire()
        return Response(200, R.collection("SessionCollection", R.SESSIONS, "Session Collection",
                                          ["%s/%s" % (R.SESSIONS, s["id"]) for s in self.store.sessions(self.name)]))

    def post_session(self, data, **_):
        username, password = data.get("UserName"), data.get("Password")
        for key, value in (("UserName", username), ("Password", password)):
            if not isinstance(value, str):
                raise R.missing_property(key)
        account = self.check_password(username, password)
        if account is None:
            raise self._unauthorized("The user name or password is not correct.")
        self._expire()
        token = secrets.token_hex(32)
        now = self.clock()
        session = {"id": secrets.token_hex(8), "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
                   "username": username, "role": account["role"], "created": now, "last_used": now}
        if not self.store.add_session(self.name, session, self.conf["max_sessions"]):
            raise Fail(503, "SessionLimitExceeded", "The session establishment failed due to the number of "
                       "simultaneous sessions exceeding the limit of the implementation (%d)."
                       % self.conf["max_sessions"], "Reduce the number of other sessions before trying to "
                       "establish the session or increase the limit of simultaneous sessions.")
        body = self._session_body(session)
        if account["password_change_required"]:
            uri = "%s/Accounts/%s" % (ACCOUNT_SERVICE, account["id"])
            body["@Message.ExtendedInfo"] = R.error_body(
                "PasswordChangeRequired", "The password provided for this account must be changed before access "
                "is granted.  PATCH the Password property for this account located at the target URI '%s' to "
                "complete this process." % uri, "Change the password for this account using a PATCH to the "
                "Password property at the URI provided.", [uri])["error"]["@Message.ExtendedInfo"]
        return Response(201, body, {"X-Auth-Token": token, "Location": body["@odata.id"]})

    def _session(self, sid):
        for session in self.store.sessions(self.name):
            if session["id"] == sid:
                return session
        raise R.missing("%s/%s" % (R.SESSIONS, sid))

    def get_session(self, sid, **_):
        return Response(200, self._session_body(self._session(sid)))

    def delete_session(self, who, sid, **_):
        session = self._session(sid)
        if session["username"] != who.username:
            self.require(who, "ConfigureManager")
        self.store.delete_session(self.name, sid)
        return Response(204)
