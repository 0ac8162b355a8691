# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Pusher plugins: procfs, sysfs, slurm, redfish power and tester; each turns a plugin file into sensor groups."""

import glob
import logging
import os
import socket
import stat
import subprocess
import time

from ansible_collections.msa.hpc.plugins.module_utils._rest import RestClient, RestError

from .info import DcdbConfigError, as_bool, parse_plugin, read_secret

LOG = logging.getLogger("dcdb.pusher")


def short_hostname():
    return socket.gethostname().split(".")[0]


def _join(*parts):
    return "/" + "/".join(p.strip("/") for p in parts if p and p.strip("/"))


def _num(text):
    value = float(text)
    return int(value) if value.is_integer() and abs(value) < 2 ** 63 else value


class Sensor:
    """One sensor of a group: topic suffix, scaling factor and optional delta of successive raw values."""

    def __init__(self, name, attrs):
        self.name = name
        self.attrs = attrs
        self.suffix = attrs.get("mqttsuffix") or name
        self.factor = float(attrs.get("factor", 1) or 1)
        self.delta = as_bool(attrs.get("delta"))
        self._last_raw = None

    def value(self, raw):
        """Raw reading → published value (None when a delta sensor has no previous reading yet)."""
        if self.delta:
            last, self._last_raw = self._last_raw, raw
            if last is None:
                return None
            raw = raw - last
        value = raw * self.factor
        return int(value) if isinstance(raw, int) and float(self.factor).is_integer() else value


class Group:
    """A sensor group: every ``interval`` ms ``read(now_ns)`` returns ``[(topic suffix, ts_ns, value)]``."""

    def __init__(self, plugin, spec):
        self.plugin = plugin
        self.name = spec["name"]
        self.spec = spec
        try:
            self.interval_ms = int(spec.get("interval", 1000))
        except ValueError:
            raise DcdbConfigError("group %s interval %r is not a whole number" % (self.name, spec.get("interval")))
        if self.interval_ms < 1:
            raise DcdbConfigError("group %s interval %r must be positive" % (self.name, self.interval_ms))
        self.part = spec.get("mqttpart") or self.name
        self.prefix = None  # a plugin's own global mqttPrefix replaces the Pusher's, as in DCDB
        self.sensors = [Sensor(s["name"], s) for s in spec.get("sensors", [])]

    def topic(self, sensor_suffix):
        return _join(self.part, sensor_suffix)

    def read(self, now_ns):
        raise NotImplementedError


class ProcfsGroup(Group):
    def __init__(self, plugin, spec):
        super().__init__(plugin, spec)
        self.kind = spec.get("type", "meminfo")
        self.path = spec.get("path") or "/proc/" + self.kind
        self._prev_cpu = {}

    def _fields(self):
        with open(self.path, encoding="ascii", errors="replace") as handle:
            text = handle.read()
        if self.kind in ("meminfo", "vmstat"):
            out = {}
            for line in text.splitlines():
                key, _, rest = line.replace(":", " ", 1).partition(" ")
                parts = rest.split()
                if parts:
                    out[key] = int(parts[0])
            if "MemTotal" in out and "MemAvailable" in out:
                out["MemUsed"] = out["MemTotal"] - out["MemAvailable"]
            return out
        if self.kind == "loadavg":
            parts = text.split()
            running, total = parts[3].split("/")
            return {"load1": float(parts[0]), "load5": float(parts[1]), "load15": float(parts[2]),
                    "running": int(running), "total": int(total)}
        out = {}  # stat
        for line in text.splitlines():
            parts = line.split()
            if not parts:
                continue
            if parts[0].startswith("cpu"):
                out[parts[0]] = [int(x) for x in parts[1:]]
            elif len(parts) == 2:
                out[parts[0]] = int(parts[1])
        return out

    _CPU_COLUMNS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")

    def read(self, now_ns):
        fields = self._fields()
        out = []
        for sensor in self.sensors:
            kind = sensor.attrs.get("type", sensor.name)
            raw = None
            if self.kind == "stat" and kind in self._CPU_COLUMNS + ("utilization",):
                cpu = fields.get(sensor.attrs.get("cpu", "cpu"))
                if cpu is None:
                    continue
                if kind == "utilization":
                    busy_idle = (sum(cpu[:8]), cpu[3] + cpu[4])
                    prev = self._prev_cpu.get(sensor.name)
                    self._prev_cpu[sensor.name] = busy_idle
                    if prev is None or busy_idle[0] == prev[0]:
                        continue
                    raw = round(100.0 * (1 - (busy_idle[1] - prev[1]) / (busy_idle[0] - prev[0])), 3)
                else:
                    raw = cpu[self._CPU_COLUMNS.index(kind)]
            else:
                raw = fields.get(kind)
            if raw is None:
                continue
            value = sensor.value(raw)
            if value is not None:
                out.append((self.topic(sensor.suffix), now_ns, value))
        return out


class SysfsGroup(Group):
    """Arbitrary files holding one number (thermal zones, hwmon power, RAPL energy); globs expand to s0, s1, …"""

    def __init__(self, plugin, spec):
        super().__init__(plugin, spec)
        expanded = []
        for sensor in self.sensors:
            path = sensor.attrs.get("path", "")
            if any(c in path for c in "*?["):
                matches = sorted(glob.glob(path))
                for i, match in enumerate(matches):
                    attrs = dict(sensor.attrs, path=match, mqttsuffix=sensor.suffix + str(i))
                    expanded.append(Sensor(sensor.name + str(i), attrs))
            else:
                expanded.append(sensor)
        self.sensors = expanded
        self._missing = set()

    def read(self, now_ns):
        out = []
        for sensor in self.sensors:
            path = sensor.attrs.get("path")
            try:
                with open(path, encoding="ascii", errors="replace") as handle:
                    raw = _num(handle.read().split()[0])
            except (OSError, ValueError, IndexError) as exc:
                if path not in self._missing:  # absent hardware is normal in containers: say it once
                    self._missing.add(path)
                    LOG.warning("sysfs sensor %s: cannot read %s (%s); skipping it", sensor.name, path, exc)
                continue
            value = sensor.value(raw)
            if value is not None:
                out.append((self.topic(sensor.suffix), now_ns, value))
        return out


class SlurmGroup(Group):
    """Job ids running on this node, as sensors ``<group>/jobid`` (one reading per job) and ``<group>/njobs``.

    Several jobs at one instant get timestamps ts, ts+1, ts+2 … ns, so each one is stored. Methods:
    ``squeue`` (``squeue -w <node> -h -o "%A %i"``: needs slurmctld reachable; a heterogeneous job's component is
    published under its own id and its leader's, an array task under its own and the array's, so ``job:<leader>``
    finds every node of the whole job), ``listpids`` (``scontrol listpids``:
    asks the local slurmd, works without the controller), ``spool`` (the step sockets
    ``<node>_<jobid>.<stepid>`` that slurmd's steps keep in ``spoolDir``: no process, no RPC, so a large simulated
    system can sample every second; a step killed with SIGKILL leaves its socket until slurmd next starts) or
    ``command`` (any program printing job ids).
    """

    def __init__(self, plugin, spec):
        super().__init__(plugin, spec)
        self.method = spec.get("method", "squeue")
        self.node = spec.get("nodename") or short_hostname()
        self.timeout = float(spec.get("timeout", 5))
        self.spool_dir = spec.get("spoolDir", "/var/lib/slurm/slurmd")
        self._warned = False

    def _argv(self):
        if self.method == "squeue":
            return ["squeue", "-w", self.node, "-h", "-o", "%A %i", "-t", "RUNNING"]
        if self.method == "listpids":
            return ["scontrol", "listpids"]
        return self.spec["command"].split()

    def _warn_once(self, fmt, *args):
        if not self._warned:
            self._warned = True
            LOG.warning("slurm group %s: " + fmt, self.name, *args)

    def _spool_job_ids(self):
        prefix = self.node + "_"
        try:
            with os.scandir(self.spool_dir) as entries:
                names = [e.name[len(prefix):] for e in entries
                         if e.name.startswith(prefix) and stat.S_ISSOCK(e.stat(follow_symlinks=False).st_mode)]
        except OSError as exc:
            self._warn_once("cannot list %s: %s", self.spool_dir, exc)
            return None
        return sorted({int(n.split(".")[0]) for n in names if n.split(".")[0].isdigit()})

    def job_ids(self):
        if self.method == "spool":
            return self._spool_job_ids()
        try:
            proc = subprocess.run(self._argv(), capture_output=True, text=True, timeout=self.timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._warn_once("%s failed: %s", self._argv()[0], exc)
            return None
        if proc.returncode != 0:
            self._warn_once("%s exited %d: %s", self._argv()[0], proc.returncode, proc.stderr.strip()[:200])
            return None
        ids = set()
        for line in proc.stdout.splitlines():
            words = line.split()
            if not words:
                continue
            if self.method == "listpids":
                words = words[1:2]
            elif self.method != "squeue":
                words = words[:1]
            for word in words:
                word = word.split("_")[0].split("+")[0].split(".")[0]  # array/het/step suffixes → the job id
                if word.isdigit():
                    ids.add(int(word))
        return sorted(ids)

    def read(self, now_ns):
        ids = self.job_ids()
        if ids is None:
            return []
        out = [(self.topic("njobs"), now_ns, len(ids))]
        out.extend((self.topic("jobid"), now_ns + i, job) for i, job in enumerate(ids))
        return out


class RedfishGroup(Group):
    """Node power from the BMC (``/redfish/v1/Chassis/<id>/Power``); an absent BMC is retried with back-off."""

    def __init__(self, plugin, spec):
        super().__init__(plugin, spec)
        self.endpoint = spec.get("endpoint", "").rstrip("/")
        self.chassis = spec.get("chassis", "")
        self.timeout = float(spec.get("timeout", 2))
        user = spec.get("username")
        password = read_secret(spec.get("passwordFile"), "group %s passwordFile" % self.name) \
            if spec.get("passwordFile") else spec.get("password")
        # A GET is all this group sends; its own back-off below is the retry, so the client makes one attempt.
        self._client = dict(username=user or None, password=password if user else None, timeout=self.timeout,
                            retries=0, validate_certs=as_bool(spec.get("verifyTLS"), True),
                            ca_path=spec.get("caFile") or None)
        if not self.sensors:
            self.sensors = [Sensor("power", {"type": "power"})]
        self._retry_at = 0.0
        self._failures = 0

    def _get(self, path):
        found = RestClient(self.endpoint, **self._client).get(path)
        if not isinstance(found, dict):
            raise ValueError("%s answered %r, not a JSON object" % (path, found))
        return found

    def read(self, now_ns):
        if time.monotonic() < self._retry_at:
            return []
        try:
            if not self.chassis:
                members = self._get("/redfish/v1/Chassis").get("Members", [])
                if not members:
                    raise ValueError("no chassis")
                self.chassis = members[0]["@odata.id"].rstrip("/").rsplit("/", 1)[-1]
            power = self._get("/redfish/v1/Chassis/%s/Power" % self.chassis)
            control = (power.get("PowerControl") or [{}])[0]
        except (RestError, OSError, ValueError, KeyError, IndexError, AttributeError) as exc:
            self._failures += 1
            delay = min(300.0, (self.interval_ms / 1000.0) * 2 ** min(self._failures, 8))
            self._retry_at = time.monotonic() + delay
            if self._failures == 1 or self._failures % 20 == 0:
                LOG.warning("redfish group %s: BMC %s unavailable (%s); retrying in %.0f s", self.name, self.endpoint,
                            exc, delay)
            return []
        self._failures = 0
        out = []
        for sensor in self.sensors:
            kind = sensor.attrs.get("type", sensor.name)
            if kind == "average":
                raw = (control.get("PowerMetrics") or {}).get("AverageConsumedWatts")
            else:
                raw = control.get("PowerConsumedWatts")
            if isinstance(raw, (int, float)) and not isinstance(raw, bool):
                value = sensor.value(raw)
                if value is not None:
                    out.append((self.topic(sensor.suffix), now_ns, value))
        return out


class TesterGroup(Group):
    """Synthetic counters (DCDB's tester plugin): ``numSensors`` sensors whose values go up by one per reading."""

    def __init__(self, plugin, spec):
        super().__init__(plugin, spec)
        if not self.sensors:
            count = int(spec.get("numSensors", 1))
            self.sensors = [Sensor("s%d" % i, {}) for i in range(count)]
        self.counter = int(spec.get("startValue", 0))

    def read(self, now_ns):
        self.counter += 1
        return [(self.topic(s.suffix), now_ns, self.counter) for s in self.sensors]


GROUP_TYPES = {"procfs": ProcfsGroup, "sysfs": SysfsGroup, "slurm": SlurmGroup, "redfish": RedfishGroup,
               "tester": TesterGroup}


def load_plugin(name, config_path):
    """Read /etc/dcdb/<plugin>.conf and build the plugin's groups."""
    if name not in GROUP_TYPES:
        raise DcdbConfigError("plugin %r is not implemented by this Pusher (have: %s)"
                              % (name, ", ".join(sorted(GROUP_TYPES))))
    try:
        with open(config_path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise DcdbConfigError("plugin %s config %r cannot be read: %s" % (name, config_path, exc.strerror))
    plugin_global, groups = parse_plugin(text, config_path)
    prefix = plugin_global.get("mqttPrefix") or plugin_global.get("mqttprefix") or ""
    out = []
    for spec in groups:
        group = GROUP_TYPES[name](name, spec)
        if prefix:
            group.prefix = prefix
        out.append(group)
    return out


def plugin_config_path(config_dir, name, given):
    """A plugin's ``config`` entry: empty → <config dir>/<plugin>.conf; relative → under the config dir."""
    return os.path.join(config_dir, given or "%s.conf" % name)
