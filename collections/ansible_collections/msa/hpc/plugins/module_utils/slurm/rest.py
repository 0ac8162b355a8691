# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_packjob's REST transport: CliTransport's methods over slurmrestd, in the API version of the release it
serves (module_utils/slurm/releases: v0.0.38 for 22.05, v0.0.42 for 24.11 to 26.05; found by a ping).

A submission's job description is built from the sbatch options render.plan derived from the job model, the pairs
the batch script's #SBATCH lines are written from; the script itself is handed on as it is, never read back."""
from __future__ import annotations

from ansible_collections.msa.hpc.plugins.module_utils.slurm.records import (
    TransportError, parse_sacct_json, parse_squeue_json)
from ansible_collections.msa.hpc.plugins.module_utils._rest import (
    NOT_DONE, RestClient, RestError, RestTransportError)
from ansible_collections.msa.hpc.plugins.module_utils._slurm_conf import parse_time
from ansible_collections.msa.hpc.plugins.module_utils.slurm import releases as R

API_VERSION = "v0.0.38"   # 22.05's; RestTransport.api is the one the server speaks
USER_HEADER = "X-SLURM-USER-NAME"
TOKEN_HEADER = "X-SLURM-USER-TOKEN"
# A POST that failed on the server may have submitted the job: never repeat one blindly. A submission whose answer
# was lost (or that a proxy in front answered 502-504) is sent again only when the job queue shows no new job of
# its name (RestTransport.submit's lookup).
RETRY_STATUSES = (502, 503, 504)
# The environment a job submitted over REST starts with (sbatch would hand on the caller's; slurmrestd refuses a
# job without one). The batch script exports the job's own variables on top.
DEFAULT_ENVIRONMENT = {"PATH": "/usr/local/bin:/usr/bin:/bin"}

# sbatch long options that render.plan writes (argv and each component's options) → v0.0.38 job properties.
# slurmrestd runs each value through the parser sbatch uses for the option, so values are handed on as written.
SBATCH_PROPERTIES = {
    "job-name": "name", "partition": "partition", "nodes": "nodes", "ntasks": "tasks",
    "cpus-per-task": "cpus_per_task", "time": "time_limit", "constraint": "constraints", "gres": "gres",
    "account": "account", "qos": "qos", "licenses": "licenses", "comment": "comment",
    "chdir": "current_working_directory", "output": "standard_output", "error": "standard_error",
    "dependency": "dependency", "begin": "begin_time",
}
# Options that only shape sbatch's own output; nothing to hand on.
SBATCH_IGNORED = frozenset(("parsable",))


class SlurmRestError(TransportError):
    """A slurmrestd call that failed; ``kind`` is auth, user, unreachable (not done), unknown (the request was sent
    and its answer lost: it may have been carried out), refused or protocol."""

    def __init__(self, message, kind="refused", status=None):
        super().__init__(message)
        self.kind = kind
        self.status = status


# --- job model → job properties ---------------------------------------------------------------------------------------

def rest_argument_spec():
    """The slurmrestd options of the modules that can use it (documented in doc fragment msa.hpc.slurmrest)."""
    return dict(rest_url=dict(type="str"), rest_user=dict(type="str"), rest_token=dict(type="str", no_log=True),
                rest_ca_path=dict(type="path"), rest_timeout=dict(type="int", default=10))


def _options(words, where):
    """``[(option, value)]`` from sbatch long options (``--name=value``, ``--flag``); others are refused."""
    out = []
    for word in words:
        if not word.startswith("--"):
            raise TransportError("%s: %r is not a long sbatch option the REST transport can hand on" % (where, word))
        name, _sep, value = word[2:].partition("=")
        out.append((name, value if _sep else True))
    return out


def job_properties(options, environment=None, chdir=None, api=API_VERSION):
    """A job description in API version ``api`` from ``[(sbatch option, value)]``: v0.0.38's ``job_properties``
    (every value as sbatch takes it), or v0.0.42's (a time limit in minutes, the environment a list of ``K=V``,
    GRES as ``tres_per_node``; measured against slurmrestd 24.11.5)."""
    props = {}
    for name, value in options:
        if name in SBATCH_IGNORED:
            continue
        key = SBATCH_PROPERTIES.get(name)
        if key is None or value is True:
            raise TransportError("sbatch option --%s%s has no counterpart the REST transport knows (known: %s)"
                                 % (name, "" if value is True else "=" + str(value),
                                    ", ".join(sorted(SBATCH_PROPERTIES))))
        props[key] = value
    props.setdefault("current_working_directory", chdir or "/tmp")
    env = dict(environment or DEFAULT_ENVIRONMENT)
    if api == API_VERSION:
        props["environment"] = env
        return props
    props["environment"] = ["%s=%s" % pair for pair in sorted(env.items())]
    if "time_limit" in props:
        try:
            minutes = parse_time(props["time_limit"])
        except ValueError as exc:
            raise TransportError("sbatch option --time=%s: %s" % (props["time_limit"], exc)) from None
        props["time_limit"] = {"set": True, "infinite": True, "number": 0} if minutes is None else minutes
    if "gres" in props:
        props["tres_per_node"] = ",".join("gres/" + g.strip() for g in str(props.pop("gres")).split(",") if g.strip())
    return props


def submission(sub, environment=None, chdir=None, api=API_VERSION):
    """The body of ``POST /slurm/<api>/job/submit`` for one submission of render.plan: one job description per
    heterogeneous component from its options, and the script as sbatch would get it on standard input.

    Options on the command line (``sub["argv"]``) win over the components' and apply to the first, as with sbatch.
    """
    per_component = [list(options) for options in sub["options"]]
    command_line = _options(list(sub["argv"][1:]), "sbatch argument")
    first = dict(per_component[0])
    first.update(dict(command_line))
    per_component[0] = list(first.items())
    jobs = [job_properties(opts, environment, chdir, api) for opts in per_component]
    body = {"script": sub["script"]}
    if len(jobs) == 1:
        body["job"] = jobs[0]
    else:
        body["jobs"] = jobs
    return body


# --- the transport -------------------------------------------------------------------------------------------------

def _slurm_errors(payload):
    """The non-empty entries of a v0.0.38 ``errors`` list, as sentences."""
    if not isinstance(payload, dict):
        return []
    out = []
    for err in payload.get("errors") or []:
        if isinstance(err, dict):
            text = err.get("description") or err.get("error") or ""
            number = err.get("error_number", err.get("error_code", err.get("errno")))
            if text or number:
                out.append("%s%s" % (text, " (error %s)" % number if number else ""))
        elif err:
            out.append(str(err))
    return out


def _generic(payload):
    """Whether an error answer names no real Slurm error (what slurmrestd sends when authentication failed)."""
    errors = payload.get("errors") if isinstance(payload, dict) else None
    if not errors:
        return True
    return all(isinstance(e, dict) and e.get("error_number", e.get("errno")) in (None, -1, 0) for e in errors)


# SLURM_PROTOCOL_AUTHENTICATION_ERROR (slurm_errno.h): slurmctld could not verify the request's credential.
AUTHENTICATION_ERROR = 1007


def refused_credentials(status, payload):
    """Whether an error answer of slurmrestd means the token was refused (wrong, expired, or minted for another user
    than X-SLURM-USER-NAME). 22.05 answers that with a 500 whose only errors are Slurm's generic -1 ("Unspecified
    error", "Failed while looking for jobs"); 24.11 with 511 and error 1007 ("Protocol authentication error",
    measured on mini); 401 and 403 are plain HTTP's. A request Slurm refused on its merits carries another error."""
    if status in (401, 403, 511) or (status == 500 and _generic(payload)):
        return True
    errors = payload.get("errors") if isinstance(payload, dict) else None
    return any(isinstance(e, dict) and e.get("error_number", e.get("errno")) == AUTHENTICATION_ERROR
               for e in errors or [])


class RestTransport:
    """Slurm through slurmrestd: submit, jobs, history, cancel, as cli.CliTransport offers them (no estimate:
    slurmrestd has no test-only submission).

    ``url`` is the API's base (``https://mgmt01:6820``); ``user`` and ``token`` travel as X-SLURM-USER-NAME and
    X-SLURM-USER-TOKEN. Records are those of parse_squeue_json/parse_sacct_json: slurmrestd answers in the
    layout ``squeue --json`` and ``sacct --json`` print. No message carries the token. ``api_version`` (``v0.0.38``,
    ``v0.0.42``) is found by api's first use unless given: the first of releases.API_PROBE_ORDER whose ping answers,
    its Slurm release checked against the supported ones.
    """

    def __init__(self, url, user, token, timeout=10, validate_certs=True, ca_path=None, environment=None,
                 chdir=None, retries=2, client=None, api_version=None):
        if not user:
            raise SlurmRestError("rest_user: %r is not a user name" % (user,), kind="user")
        if not token:
            raise SlurmRestError("rest_token: empty; give the JWT from `scontrol token username=%s`" % user,
                                 kind="auth")
        self.url, self.user, self._token = url, user, token
        self.environment, self.chdir = environment, chdir
        self._api = api_version
        try:
            self.client = client or RestClient(url, token=token, token_header=TOKEN_HEADER,
                                               validate_certs=validate_certs, ca_path=ca_path, timeout=timeout,
                                               retries=retries, retry_statuses=RETRY_STATUSES)
        except RestError as exc:
            raise SlurmRestError("rest_url: %s" % self._scrub(str(exc)), kind="protocol")

    def _scrub(self, text):
        return str(text).replace(self._token, "<token>") if self._token else str(text)

    def _call(self, method, path, body=None, what=None, lookup=None):
        what = what or "%s %s" % (method, path)
        try:
            status, payload, _headers = self.client.request(method, path, body=body, headers={USER_HEADER: self.user},
                                                            expect=(200,), lookup=lookup)
        except RestError as exc:
            raise self._translate(exc, what, path)
        errors = _slurm_errors(payload)
        if errors:
            raise SlurmRestError(self._scrub("slurmrestd at %s: %s failed: %s" % (self.url, what, "; ".join(errors))),
                                 kind="refused", status=status)
        return payload or {}

    def _translate(self, exc, what, path):
        status = exc.status
        detail = "; ".join(_slurm_errors(exc.body))
        if isinstance(exc, RestTransportError) and exc.outcome != NOT_DONE:
            return SlurmRestError(self._scrub("slurmrestd at %s: the %s was sent but its answer was lost, so it may "
                                              "have been carried out (check squeue before trying again): %s"
                                              % (self.url, what, exc)), kind="unknown")
        if status is None:
            return SlurmRestError(self._scrub("slurmrestd is unreachable at %s (rest_url): %s" % (self.url, exc)),
                                  kind="unreachable")
        if refused_credentials(status, exc.body):
            return SlurmRestError(
                "slurmrestd at %s refused the credentials of user %r (HTTP %s): the token (rest_token) is wrong or "
                "expired, or was not minted for this user (rest_user); get a new one with `scontrol token "
                "username=%s`" % (self.url, self.user, status, self.user), kind="auth", status=status)
        if status == 404:
            plugin = ("openapi/%s%s" % ("db" if "/slurmdb/" in path else "", API_VERSION) if self._api == API_VERSION
                      else "openapi/%s" % ("slurmdbd" if "/slurmdb/" in path else "slurmctld"))
            return SlurmRestError("slurmrestd at %s has no %s (HTTP 404 for %s): is the %s plugin loaded "
                                  "(slurmrestd -s)?" % (self.url, what, path, plugin), kind="protocol", status=status)
        return SlurmRestError(self._scrub("slurmrestd at %s: %s failed (HTTP %s)%s" % (
            self.url, what, status, ": " + detail if detail else "")), kind="refused", status=status)

    @property
    def api(self):
        """The API version spoken with this slurmrestd (found by a ping on first use)."""
        if self._api is None:
            self._api = self._probe()
        return self._api

    def _probe(self):
        for version in R.API_PROBE_ORDER:
            try:
                payload = self._call("GET", "/slurm/%s/ping" % version, what="ping (%s)" % version)
            except SlurmRestError as exc:
                if exc.status == 404:
                    continue
                raise
            meta = payload.get("meta") or {}
            release = (meta.get("slurm") or meta.get("Slurm") or {}).get("release")
            if release:
                try:
                    wanted = R.api_version(release, "slurmrestd's Slurm release")
                except R.ReleaseError as exc:
                    raise SlurmRestError("slurmrestd at %s: %s" % (self.url, exc), kind="protocol") from None
                if wanted != version:
                    raise SlurmRestError("slurmrestd at %s: Slurm %s is spoken to in %s, but its ping answered at %s "
                                         "only" % (self.url, release, wanted, version), kind="protocol")
            return version
        raise SlurmRestError("slurmrestd at %s serves none of the API versions this collection speaks (%s: %s); "
                             "supported Slurm releases: %s" % (
                                 self.url, ", ".join(R.API_PROBE_ORDER), "HTTP 404 for each ping",
                                 ", ".join(R.SUPPORTED)), kind="protocol", status=404)

    # The methods of CliTransport.
    def submit(self, sub):
        """Submit one submission of render.plan (its options, argv and script); return the job id."""
        body = submission(sub, self.environment, self.chdir, self.api)
        name = dict(sub["options"][0]).get("job-name")
        lookup = None
        if name:
            # The jobs of this name before the submission: one more after a lost answer is the job it made.
            before = {r["job_id"] for r in self.jobs(self.user) if r["name"] == name}

            def lookup():
                return self._submitted(name, before)
        payload = self._call("POST", "/slurm/%s/job/submit" % self.api, body, "job submission", lookup=lookup)
        job_id = payload.get("job_id")
        if not isinstance(job_id, int) or isinstance(job_id, bool):
            raise SlurmRestError("slurmrestd at %s answered the job submission without a job id: %r"
                                 % (self.url, {k: v for k, v in payload.items() if k != "script"}),
                                 kind="protocol")
        return job_id

    def _submitted(self, name, before):
        """``{"job_id": id}`` of the job (or heterogeneous job) named ``name`` that is not in ``before``, or None."""
        new = [r for r in self.jobs(self.user) if r["name"] == name and r["job_id"] not in before]
        leaders = sorted(r["het_job_id"] or r["job_id"] for r in new)
        return {"job_id": leaders[0]} if leaders else None

    def jobs(self, user=None):
        """Every job slurmctld still holds, as records (of ``user`` only when given)."""
        records = parse_squeue_json(self._call("GET", "/slurm/%s/jobs" % self.api, what="job list"))
        return [r for r in records if user is None or r["user"] == user]

    def history(self, job_ids):
        """Records of finished jobs from accounting (slurmdb); each id with its heterogeneous components."""
        out = []
        for job_id in job_ids or []:
            out += parse_sacct_json(self._call("GET", "/slurmdb/%s/job/%d" % (self.api, int(job_id)),
                                               what="accounting record of job %s" % job_id))
        return out

    def cancel(self, job_ids):
        for job_id in job_ids or []:
            self._call("DELETE", "/slurm/%s/job/%d" % (self.api, int(job_id)), what="cancel of job %s" % job_id)

    def get(self, path):
        """The decoded JSON of a GET on the API, or None for a path it does not have (HTTP 404)."""
        try:
            return self._call("GET", path)
        except SlurmRestError as exc:
            if exc.status == 404:
                return None
            raise

    def ping(self):
        """Check the API, the credentials and the controller; returns the ping records."""
        return self._call("GET", "/slurm/%s/ping" % self.api, what="ping").get("pings") or []
