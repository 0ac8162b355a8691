# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""DCDB configuration: Boost INFO files (parse/write), Pusher plugin files and the plugin list (render, validate, diff)."""

import difflib
import os
import re

# ---------------------------------------------------------------------------------------------------------------------
# INFO format (boost::property_tree::info_parser), the format of /etc/dcdb/*.conf:
#   key value            ; a comment runs from ';' to the end of the line
#   key "quoted value"   ; quotes allow spaces and escapes (\" \\ \n \t \r \0 \a \b \f \v)
#   key value {          ; '{' opens the children of the key before it (same line or the next one)
#       child 1
#   }
# Keys repeat (several `sensor` or `plugin` entries), so a node keeps an ordered list of children.
# ---------------------------------------------------------------------------------------------------------------------

_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            '"': '"', "'": "'", "\\": "\\"}
_UNESCAPES = {v: "\\" + k for k, v in _ESCAPES.items() if k != "'"}
_BARE = re.compile(r'[^\s;{}"]+')


class InfoError(ValueError):
    """An INFO file cannot be parsed; the message names the source and the line."""

    def __init__(self, source, line, message):
        self.source, self.line = source, line
        super().__init__("%s:%d: %s" % (source, line, message))


class InfoNode:
    """One entry of an INFO tree: a key, a value (a string, '' when absent) and ordered children."""

    __slots__ = ("key", "value", "children")

    def __init__(self, key="", value="", children=None):
        self.key = key
        self.value = value
        self.children = list(children or [])

    def __eq__(self, other):
        return (isinstance(other, InfoNode) and self.key == other.key and self.value == other.value
                and self.children == other.children)

    def __repr__(self):
        return "InfoNode(%r, %r, %r)" % (self.key, self.value, self.children)

    def add(self, key, value="", children=None):
        node = InfoNode(key, "" if value is None else str(value), children)
        self.children.append(node)
        return node

    def get(self, key):
        """The first child called ``key`` (case-insensitive, as DCDB compares keys) or None."""
        low = key.lower()
        for child in self.children:
            if child.key.lower() == low:
                return child
        return None

    def get_all(self, *keys):
        lows = {k.lower() for k in keys}
        return [c for c in self.children if c.key.lower() in lows]

    def value_of(self, key, default=None):
        child = self.get(key)
        return default if child is None else child.value

    def remove(self, key):
        low = key.lower()
        before = len(self.children)
        self.children = [c for c in self.children if c.key.lower() != low]
        return before - len(self.children)

    def to_plain(self):
        """Nested ``[key, value, [children]]`` lists, handy for comparisons and JSON."""
        return [self.key, self.value, [c.to_plain() for c in self.children]]


def _read_quoted(text, pos, source, lineno):
    out = []
    i = pos + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text):
                break
            esc = text[i + 1]
            if esc not in _ESCAPES:
                raise InfoError(source, lineno, "unknown escape \\%s in a quoted string" % esc)
            out.append(_ESCAPES[esc])
            i += 2
            continue
        if ch == '"':
            return "".join(out), i + 1
        out.append(ch)
        i += 1
    raise InfoError(source, lineno, "unterminated quoted string")


def _tokens(text, source):
    """Yield (lineno, kind, value) with kind in word/open/close/newline; ';' comments dropped."""
    for lineno, line in enumerate(text.splitlines(), 1):
        pos = 0
        while pos < len(line):
            ch = line[pos]
            if ch in " \t\r\f\v":
                pos += 1
            elif ch == ";":
                break
            elif ch == "{":
                yield lineno, "open", "{"
                pos += 1
            elif ch == "}":
                yield lineno, "close", "}"
                pos += 1
            elif ch == '"':
                word, pos = _read_quoted(line, pos, source, lineno)
                yield lineno, "qword", word
            else:
                m = _BARE.match(line, pos)
                yield lineno, "word", m.group(0)
                pos = m.end()
        yield lineno, "newline", None


def parse_info(text, source="<string>", include_dir=None, _depth=0):
    """Parse INFO text into a root InfoNode (key '', children = the top-level entries).

    ``#include "file"`` lines are honoured relative to ``include_dir`` (the including file's directory).
    """
    root = InfoNode()
    stack = [root]
    last = None          # the entry the next '{' belongs to
    fields = []          # words seen on the current line
    line_of_fields = 0

    def flush(lineno):
        nonlocal last, fields
        if not fields:
            return
        if len(fields) > 2:
            raise InfoError(source, lineno, "expected 'key [value]', found %d words: %s (quote values with "
                                            "spaces)" % (len(fields), " ".join(repr(f[0]) for f in fields)))
        (key, key_quoted) = fields[0]
        value = fields[1][0] if len(fields) == 2 else ""
        fields = []
        if key == "#include" and not key_quoted:
            if _depth >= 8:
                raise InfoError(source, lineno, "#include nested more than 8 deep")
            path = value if os.path.isabs(value) or include_dir is None else os.path.join(include_dir, value)
            try:
                with open(path, encoding="utf-8") as handle:
                    sub = parse_info(handle.read(), path, os.path.dirname(path), _depth + 1)
            except OSError as exc:
                raise InfoError(source, lineno, "cannot include %s: %s" % (path, exc.strerror))
            stack[-1].children.extend(sub.children)
            last = None
            return
        last = stack[-1].add(key, value)

    for lineno, kind, value in _tokens(text, source):
        if kind in ("word", "qword"):
            if not fields:
                line_of_fields = lineno
            fields.append((value, kind == "qword"))
        elif kind == "newline":
            flush(lineno)
        elif kind == "open":
            flush(lineno)
            if last is None:
                raise InfoError(source, lineno, "'{' without a key before it")
            stack.append(last)
            last = None
        else:  # close
            flush(lineno)
            if len(stack) == 1:
                raise InfoError(source, lineno, "'}' without a matching '{'")
            stack.pop()
            last = None
    flush(line_of_fields)
    if len(stack) > 1:
        raise InfoError(source, text.count("\n") + 1, "'{' of %r is never closed" % stack[-1].key)
    return root


def load_info(path):
    with open(path, encoding="utf-8") as handle:
        return parse_info(handle.read(), path, os.path.dirname(os.path.abspath(path)))


def _quote(word):
    if word and _BARE.fullmatch(word) and word != "#include" and not any(c in word for c in "\\'"):
        return word
    return '"' + "".join(_UNESCAPES.get(c, c) for c in word) + '"'


def dump_info(root, indent="    ", header=None):
    """Write an InfoNode tree (the root's children) as INFO text that parse_info reads back unchanged."""
    lines = []
    if header:
        lines.extend("; " + h if h else ";" for h in header.splitlines())
        lines.append("")

    def walk(node, depth):
        pad = indent * depth
        text = pad + _quote(node.key)
        if node.value != "":
            text += " " + _quote(node.value)
        if node.children:
            lines.append(text + " {")
            for child in node.children:
                walk(child, depth + 1)
            lines.append(pad + "}")
        else:
            lines.append(text)

    for i, child in enumerate(root.children):
        if i and depth_break(child, root.children[i - 1]):
            lines.append("")
        walk(child, 0)
    return "\n".join(lines) + "\n"


def depth_break(node, previous):
    """A blank line between top-level sections that have children, for readability."""
    return bool(node.children or previous.children)


# ---------------------------------------------------------------------------------------------------------------------
# Pusher plugin configuration: /etc/dcdb/<plugin>.conf and the `plugins` section of /etc/dcdb/dcdbpusher.conf.
# ---------------------------------------------------------------------------------------------------------------------

# Plugins the stand-in Pusher implements, plus names of real DCDB plugins a site may configure for the vendor daemon.
PLUGINS_IMPLEMENTED = ("procfs", "sysfs", "slurm", "redfish", "tester")
PLUGINS_KNOWN = PLUGINS_IMPLEMENTED + ("perfevent", "ipmi", "pdu", "snmp", "bacnet", "gpfsmon", "opa", "msr",
                                       "nvml", "caliper")
INTERVAL_MIN_MS = 10
INTERVAL_MAX_MS = 3600 * 1000
PROCFS_TYPES = ("stat", "meminfo", "loadavg", "vmstat")
SLURM_METHODS = ("squeue", "listpids", "spool", "command")
DEFAULT_CONFIG_DIR = "/etc/dcdb"
DEFAULT_PLUGIN_LIB = "/usr/lib/dcdb"
MANAGED_HEADER = "Managed by Ansible (msa.hpc.dcdb_plugin): local edits are overwritten."

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_TOPIC_LEVEL = re.compile(r"[A-Za-z0-9_.:%-]+")
_PATH = re.compile(r"/(proc|sys)(/[A-Za-z0-9_.:,@+*?\[\]-]+)+")


class DcdbConfigError(ValueError):
    """A DCDB configuration value is invalid; the message names the field and the value."""


def validate_topic(topic, field="mqttprefix", allow_placeholders=True):
    """Check MQTT topic syntax as the Pusher uses it: '/level/level…', no wildcards, no empty levels."""
    if not isinstance(topic, str) or not topic.startswith("/"):
        raise DcdbConfigError("%s %r must start with '/' (for example /msa/cm/%%h)" % (field, topic))
    if len(topic.encode()) > 65535:
        raise DcdbConfigError("%s is longer than the 65535 bytes MQTT allows" % field)
    if topic == "/":
        return topic
    for level in topic[1:].split("/"):
        if level == "":
            raise DcdbConfigError("%s %r has an empty level ('//' or a trailing '/')" % (field, topic))
        if "+" in level or "#" in level:
            raise DcdbConfigError("%s %r contains an MQTT wildcard (+ or #), which cannot be published to"
                                  % (field, topic))
        if not _TOPIC_LEVEL.fullmatch(level) or (not allow_placeholders and "%" in level):
            raise DcdbConfigError("%s %r: level %r may only hold letters, digits and _ . : - %s"
                                  % (field, topic, level, "%" if allow_placeholders else ""))
    return topic


def topic_part(value, field):
    """A group's mqttpart or a sensor's mqttsuffix: one or more topic levels, written with a leading '/'."""
    text = str(value)
    if not text.startswith("/"):
        text = "/" + text
    return validate_topic(text, field)


def _name(value, field):
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise DcdbConfigError("%s %r is not a valid name (letters, digits, _ . -, starting with a letter or digit)"
                              % (field, value))
    return value


def _interval(value, field):
    try:
        ms = int(value)
    except (TypeError, ValueError):
        raise DcdbConfigError("%s %r is not a whole number of milliseconds" % (field, value))
    if not INTERVAL_MIN_MS <= ms <= INTERVAL_MAX_MS:
        raise DcdbConfigError("%s %r is outside %d..%d ms" % (field, value, INTERVAL_MIN_MS, INTERVAL_MAX_MS))
    return ms


def _number(value, field):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise DcdbConfigError("%s %r is not a number" % (field, value))


def _path(value, field):
    if not isinstance(value, str) or not _PATH.fullmatch(value) or "/../" in value + "/" or "/./" in value + "/":
        raise DcdbConfigError("%s %r is not an absolute /proc or /sys path (no '..', spaces or quotes)" % (field, value))
    return value


def _scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def normalize_plugin(plugin, groups, plugin_global=None):
    """Validate a plugin's groups and return them in canonical form (a list of plain dicts).

    ``groups``: ``[{name, interval, mqttpart?, <plugin attributes>..., sensors: [{name, <attributes>...}]}]``.
    Raises DcdbConfigError naming the offending field and value.
    """
    if plugin not in PLUGINS_KNOWN:
        raise DcdbConfigError("plugin %r is not a DCDB Pusher plugin (known: %s)" % (plugin, ", ".join(PLUGINS_KNOWN)))
    plugin_global = dict(plugin_global or {})
    for key, value in plugin_global.items():
        _name(key, "global option name")
        if isinstance(value, (dict, list)):
            raise DcdbConfigError("global option %s of plugin %s must be a scalar, got %r" % (key, plugin, value))
        if key.lower() == "mqttprefix":
            validate_topic(str(value), "global.mqttPrefix of plugin %s" % plugin)
    if not isinstance(groups, list):
        raise DcdbConfigError("groups of plugin %s must be a list, got %r" % (plugin, groups))
    seen = set()
    out = []
    for gi, group in enumerate(groups):
        where = "groups[%d]" % gi
        if not isinstance(group, dict):
            raise DcdbConfigError("%s must be a mapping, got %r" % (where, group))
        name = _name(group.get("name"), where + ".name")
        if name in seen:
            raise DcdbConfigError("%s.name %r appears twice in plugin %s" % (where, name, plugin))
        seen.add(name)
        where = "group %s" % name
        g = {"name": name, "interval": _interval(group.get("interval", 1000), where + ".interval")}
        if group.get("mqttpart") not in (None, ""):
            g["mqttpart"] = topic_part(group["mqttpart"], where + ".mqttpart")
        for key, value in group.items():
            if key in ("name", "interval", "mqttpart", "sensors") or value is None:
                continue
            _name(key, where + " option name")
            if isinstance(value, (dict, list)):
                raise DcdbConfigError("%s.%s must be a scalar, got %r" % (where, key, value))
            g[key] = _scalar(value)
        _check_group(plugin, g, where)
        sensors = group.get("sensors") or []
        if not isinstance(sensors, list):
            raise DcdbConfigError("%s.sensors must be a list, got %r" % (where, sensors))
        if not sensors and plugin not in ("tester", "slurm", "redfish"):
            raise DcdbConfigError("%s.sensors is empty: plugin %s reads only the sensors listed" % (where, plugin))
        names = set()
        g["sensors"] = []
        for si, sensor in enumerate(sensors):
            swhere = "%s.sensors[%d]" % (where, si)
            if not isinstance(sensor, dict):
                raise DcdbConfigError("%s must be a mapping, got %r" % (swhere, sensor))
            sname = _name(sensor.get("name"), swhere + ".name")
            if sname in names:
                raise DcdbConfigError("%s.name %r appears twice in %s" % (swhere, sname, where))
            names.add(sname)
            swhere = "%s sensor %s" % (where, sname)
            s = {"name": sname}
            for key, value in sensor.items():
                if key == "name" or value is None:
                    continue
                _name(key, swhere + " option name")
                if isinstance(value, (dict, list)):
                    raise DcdbConfigError("%s.%s must be a scalar, got %r" % (swhere, key, value))
                s[key] = _scalar(value)
            _check_sensor(plugin, g, s, swhere)
            g["sensors"].append(s)
        out.append(g)
    return out


def _check_group(plugin, g, where):
    if plugin == "procfs":
        kind = g.get("type", "")
        if kind not in PROCFS_TYPES:
            raise DcdbConfigError("%s.type %r must be one of %s" % (where, kind, ", ".join(PROCFS_TYPES)))
        g["path"] = _path(g.get("path", "/proc/" + kind), where + ".path")
    elif plugin == "slurm":
        method = g.get("method", "squeue")
        if method not in SLURM_METHODS:
            raise DcdbConfigError("%s.method %r must be one of %s" % (where, method, ", ".join(SLURM_METHODS)))
        if method == "command" and not g.get("command"):
            raise DcdbConfigError("%s.command is required when method is 'command'" % where)
    elif plugin == "redfish":
        endpoint = g.get("endpoint", "")
        if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", endpoint):
            raise DcdbConfigError("%s.endpoint %r is not an http(s):// URL of a BMC" % (where, endpoint))
    elif plugin == "tester" and "numSensors" in g:
        if not g["numSensors"].isdigit() or not 1 <= int(g["numSensors"]) <= 100000:
            raise DcdbConfigError("%s.numSensors %r must be 1..100000" % (where, g["numSensors"]))


def _check_sensor(plugin, g, s, where):
    if "mqttsuffix" in s:
        s["mqttsuffix"] = topic_part(s["mqttsuffix"], where + ".mqttsuffix")
    if "factor" in s:
        _number(s["factor"], where + ".factor")
    if plugin == "sysfs":
        if "path" not in s:
            raise DcdbConfigError("%s.path is required for a sysfs sensor" % where)
        _path(s["path"], where + ".path")
    elif plugin == "procfs" and not s.get("type"):
        raise DcdbConfigError("%s.type is required: the %s field to read (for example MemFree, utilization, load1)"
                              % (where, g.get("type")))


def render_plugin(plugin, groups, plugin_global=None, header=MANAGED_HEADER):
    """The text of /etc/dcdb/<plugin>.conf for normalised groups (output of normalize_plugin)."""
    root = InfoNode()
    if plugin_global:
        glob = root.add("global")
        for key in sorted(plugin_global):
            glob.add(key, _scalar(plugin_global[key]))
    for group in groups:
        node = root.add("group", group["name"])
        node.add("interval", group["interval"])
        for key, value in group.items():
            if key not in ("name", "interval", "sensors"):
                node.add(key, value)
        for sensor in group.get("sensors", []):
            snode = node.add("sensor", sensor["name"])
            for key, value in sensor.items():
                if key != "name":
                    snode.add(key, value)
    return dump_info(root, header=header)


def parse_plugin(text, source="<plugin>"):
    """Read a plugin file back into (global dict, groups list) — the inverse of render_plugin.

    Accepts DCDB's synonyms (``file``/``template_group`` for groups, ``metric`` for sensors); template
    groups are merged into the groups that name them with ``default``.
    """
    root = parse_info(text, source)
    glob = {}
    node = root.get("global")
    if node is not None:
        glob = {c.key: c.value for c in node.children}
    templates = {}
    for entry in root.children:
        if entry.key.lower().startswith("template_"):
            templates[entry.value] = entry
    groups = []
    for entry in root.children:
        if entry.key.lower() not in ("group", "file", "sensorgroup", "entity"):
            continue
        g = {"name": entry.value, "sensors": []}
        sources = []
        template = entry.value_of("default")
        if template and template in templates:
            sources.append(templates[template])
        sources.append(entry)
        for src in sources:
            for child in src.children:
                low = child.key.lower()
                if low in ("sensor", "metric"):
                    s = {"name": child.value}
                    s.update({c.key: c.value for c in child.children})
                    g["sensors"] = [x for x in g["sensors"] if x["name"] != s["name"]] + [s]
                elif low != "default":
                    g[child.key] = child.value
        if "interval" in g:
            try:
                g["interval"] = int(g["interval"])
            except ValueError:
                pass
        groups.append(g)
    return glob, groups


def pusher_plugins(root):
    """``[(name, config path)]`` from the ``plugins`` section of a parsed dcdbpusher.conf."""
    out = []
    section = root.get("plugins")
    if section is None:
        return out
    for entry in section.get_all("plugin"):
        out.append((entry.value, entry.value_of("config", "") or ""))
    return out


def set_pusher_plugin(root, name, config_path, present=True, lib_path=DEFAULT_PLUGIN_LIB):
    """Add/update (present) or remove a plugin entry in a parsed dcdbpusher.conf; return True if it changed."""
    section = root.get("plugins")
    if section is None:
        if not present:
            return False
        section = root.add("plugins")
    existing = [e for e in section.get_all("plugin") if e.value == name]
    if not present:
        if not existing:
            return False
        section.children = [c for c in section.children if not (c.key.lower() == "plugin" and c.value == name)]
        return True
    if existing:
        entry = existing[0]
        if entry.value_of("config", "") == config_path:
            return False
        cfg = entry.get("config")
        if cfg is None:
            entry.add("config", config_path)
        else:
            cfg.value = config_path
        return True
    entry = section.add("plugin", name)
    entry.add("path", lib_path)
    entry.add("config", config_path)
    return True


def set_pusher_global(root, settings):
    """Make the ``global`` section of a parsed dcdbpusher.conf exactly ``settings`` (scalars, in their order),
    first in the file; return True if it changed."""
    wanted = InfoNode("global")
    for key, value in settings.items():
        _name(key, "pusher_global option name")
        if isinstance(value, (dict, list, tuple)) or value is None:
            raise DcdbConfigError("pusher_global.%s must be a scalar, got %r" % (key, value))
        if key.lower() == "mqttprefix":
            validate_topic(str(value), "pusher_global.%s" % key)
        wanted.add(key, _scalar(value))
    current = root.get("global")
    if current is not None and current == wanted and root.children[0] is current:
        return False
    root.children = [wanted] + [c for c in root.children if c.key.lower() != "global"]
    return True


def unified_diff(before, after, path):
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                        "a" + path, "b" + path))


def plan_plugin(plugin, state, groups, plugin_global, config_dir, pusher_conf, read_file, pusher_global=None):
    """Compute the files a plugin change writes (and the Pusher's global section, when ``pusher_global`` is given).

    ``read_file(path)`` returns the current text or None. Returns ``{path: (before or None, after or None)}``
    holding only files whose content changes (after None = delete), and the plugin list afterwards.
    """
    plugin_conf = os.path.join(config_dir, "%s.conf" % plugin)
    changes = {}
    before_pusher = read_file(pusher_conf)
    root = parse_info(before_pusher or "", pusher_conf)
    if state == "present":
        norm = normalize_plugin(plugin, groups, plugin_global)
        text = render_plugin(plugin, norm, plugin_global)
        current = read_file(plugin_conf)
        if current != text:
            changes[plugin_conf] = (current, text)
        touched = set_pusher_plugin(root, plugin, plugin_conf, True)
    else:
        current = read_file(plugin_conf)
        if current is not None:
            changes[plugin_conf] = (current, None)
        touched = set_pusher_plugin(root, plugin, plugin_conf, False)
    if pusher_global is not None:
        touched = set_pusher_global(root, pusher_global) or touched
    if touched:
        changes[pusher_conf] = (before_pusher, dump_info(root, header=MANAGED_HEADER))
    return changes, [name for name, plugin_path in pusher_plugins(root)]
