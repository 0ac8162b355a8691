# SPDX-License-Identifier: GPL-3.0-or-later
"""The one codec of the job options msa.hpc reads from a job's comment (slurm_packjob, gateway and NAM hooks)."""
from __future__ import annotations

import re

from ansible_collections.msa.hpc.plugins.module_utils._sizes import SizeError, parse_size

# The job comment is the one field Slurm hands to PrologSlurmctld/EpilogSlurmctld and shows in squeue/scontrol/sacct,
# so a job's wishes for gateways, NAM and GCE travel in it, in one of two forms:
#   written by msa.hpc.slurm_packjob:  msa:gw_num=2;gw_file=/home/u/route;gw_plugin=balance;gw_cleanup=1;nam_bytes=N
#   written by hand (seed 004 §4.2):    gw_num=2,gw_file=route.txt,gw_cleanup nam=100G,nam_nonvolatile
# A hand-written comment may hold other words; only the keys below are read from it. Both forms decode to the
# same typed options; every value is checked here, so a hook never acts on one it has not validated.
PREFIX = "msa:"
_KEY = re.compile(r"^[a-z][a-z0-9_]*$")
_VALUE_FORBIDDEN = re.compile(r"[\s;=,\x00]")
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")          # routing strategies, NAM allocation names, devices
_HANDWRITTEN = re.compile(r"(?<![\w-])(gw_num|gw_file|gw_plugin|gw_cleanup|nam_bytes|nam_nonvolatile|nam_name|"
                          r"nam_device|nam|gce)(?![\w-])(?:=([^,;\s]*))?")
MAX_PATH = 1024
TRUE, FALSE = ("", "1", "yes", "true", "on"), ("0", "no", "false", "off")
FLAGS = ("gw_cleanup", "nam_nonvolatile")   # may stand alone in a hand-written comment


class JobOptionError(ValueError):
    """An option of the job comment that cannot be used; the message names the key and the value."""


# --- the two textual forms -------------------------------------------------------------------------------------

def format_options(fields):
    """``msa:key=value;...`` in the order given. Raises JobOptionError for a key or value the form cannot carry."""
    items = []
    for key, value in fields:
        key, value = str(key), "" if value is None else str(value)
        if not _KEY.match(key):
            raise JobOptionError("job comment: key %r is not a lower-case option name" % (key,))
        if _VALUE_FORBIDDEN.search(value):
            raise JobOptionError("job comment: %s=%r holds white space, ';', '=' or ','" % (key, value))
        items.append("%s=%s" % (key, value))
    return PREFIX + ";".join(items)


def parse_msa(text):
    """The fields of an ``msa:`` comment as strings (``{}`` for any other comment); a repeated key is an error."""
    if not text or not str(text).startswith(PREFIX):
        return {}
    out = {}
    for item in str(text)[len(PREFIX):].split(";"):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not _KEY.match(key):
            raise JobOptionError("job comment: %r is not key=value" % (item,))
        if key in out:
            raise JobOptionError("job comment: %s is given twice (%r and %r)" % (key, out[key], value.strip()))
        out[key] = value.strip()
    return out


def parse_handwritten(text):
    """The msa.hpc keys of a hand-written comment (``gw_num=2,gw_file=f nam=1G``) as strings; a flag is ``""``."""
    out = {}
    for m in _HANDWRITTEN.finditer(str(text or "")):
        key, value = m.group(1), m.group(2)
        if value is None:
            if key not in FLAGS:
                continue  # a bare "gce" or "nam" is a word of the comment, not an option
            value = ""
        if key in out:
            raise JobOptionError("job comment: %s is given twice (%r and %r)" % (key, out[key], value))
        out[key] = value
    return out


def parse_raw(text):
    """Either form → ``{key: string}``."""
    text = "" if text in (None, "(null)") else str(text)
    return parse_msa(text) if text.startswith(PREFIX) else parse_handwritten(text)


# --- typed values ----------------------------------------------------------------------------------------------

def check_name(value, key):
    """A bare name (``[A-Za-z0-9_-]``, at most 64): no path, no ``..``, no ``module:function``."""
    text = str(value)
    if not NAME.match(text):
        raise JobOptionError("%s: %r is not a bare name (letters, digits, '_' and '-' only; no path, '.', ':')"
                             % (key, value))
    return text


def check_path(value, key):
    """A file name a job may give (absolute or relative to its working directory): no ``..``, no NUL, no ``~``."""
    text = str(value)
    if not text or len(text) > MAX_PATH or "\x00" in text or any(c in text for c in "\n\r\t ;,="):
        raise JobOptionError("%s: %r is not a usable file name" % (key, value))
    parts = text.split("/")
    if ".." in parts:
        raise JobOptionError("%s: %r climbs out of its directory ('..')" % (key, value))
    if text.startswith("~") or text.endswith("/") or parts[-1] in ("", "."):
        raise JobOptionError("%s: %r does not name a file" % (key, value))
    return text


def check_count(value, key, minimum=0, maximum=1 << 16):
    text = str(value).strip()
    if not re.match(r"^[0-9]{1,6}$", text) or not minimum <= int(text) <= maximum:
        raise JobOptionError("%s: %r is not a whole number from %d to %d" % (key, value, minimum, maximum))
    return int(text)


def check_bool(value, key):
    text = str(value).strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise JobOptionError("%s: %r is not a boolean (1/0, yes/no, true/false, on/off)" % (key, value))


def check_size(value, key):
    try:
        return parse_size(value, key)
    except SizeError as exc:
        raise JobOptionError(str(exc)) from None


# key -> (decoder, attribute); a flag written bare in a hand-written comment decodes as true.
_DECODERS = {
    "gw_num": lambda v, k: check_count(v, k, 0, 4096),
    "gw_file": check_path,
    "gw_plugin": check_name,
    "gw_cleanup": check_bool,
    "nam": check_size,
    "nam_bytes": check_size,
    "nam_nonvolatile": check_bool,
    "nam_name": check_name,
    "nam_device": check_name,
    "gce": check_bool,
}
HOOK_KEYS = tuple(_DECODERS)


GATEWAY_KEYS = ("gw_num", "gw_file", "gw_plugin", "gw_cleanup")
NAM_KEYS = ("nam", "nam_bytes", "nam_nonvolatile", "nam_name", "nam_device", "gce")


def decode(text, only=None):
    """The job options of a comment, typed and validated: ``{"gw_num": 2, "gw_file": "r.txt", "nam": 1073741824,
    ...}`` with only the keys present (``nam_bytes`` reads as ``nam``). Keys of other tools pass untouched under
    their own names in the ``msa:`` form. With ``only`` (GATEWAY_KEYS, NAM_KEYS) the other options are left out
    unchecked: each hook judges its own. Raises JobOptionError naming the key and value of the first bad one."""
    raw = parse_raw(text)
    if only is not None:
        raw = {k: v for k, v in raw.items() if k in only}
    if "nam" in raw and "nam_bytes" in raw:
        raise JobOptionError("job comment: nam=%r and nam_bytes=%r both given" % (raw["nam"], raw["nam_bytes"]))
    out = {}
    for key, value in raw.items():
        decoder = _DECODERS.get(key)
        if decoder is None:
            out[key] = value
            continue
        if value == "" and decoder not in (check_bool,):
            raise JobOptionError("%s: %r is empty" % (key, value))
        out["nam" if key == "nam_bytes" else key] = decoder(value, key)
    return out


def encode(options, extra=()):
    """Typed options (as decode returns them) → the ``msa:`` form; ``extra`` (key, value) pairs follow."""
    fields = []
    for key in HOOK_KEYS:
        if key == "nam_bytes" or options.get(key) is None or options[key] is False:
            continue
        value = options[key]
        _DECODERS[key](value, key)  # refuse what the hooks would refuse
        fields.append(("nam_bytes" if key == "nam" else key, 1 if value is True else value))
    return format_options(fields + list(extra))


# The delay switch (seed 004 §5.2.2): job_submit.lua writes delay=M (minutes) and, for a workflow's delayed part,
# delay_after=<leader job>; the controller's delay hook (module_utils/node/delay_hooks) reads them.
DELAY_KEYS = ("delay", "delay_after")


def decode_delay(text):
    """``{"delay": minutes, "delay_after": "<job id>"}`` with the keys present in an ``msa:`` comment, validated;
    ``delay_after`` needs ``delay``. Raises JobOptionError naming the key and value."""
    raw = {k: v for k, v in parse_msa("" if text in (None, "(null)") else str(text)).items() if k in DELAY_KEYS}
    out = {}
    if "delay" in raw:
        out["delay"] = check_count(raw["delay"], "delay", 0, 525600)
    if "delay_after" in raw:
        if "delay" not in raw:
            raise JobOptionError("delay_after: %r is given without delay" % (raw["delay_after"],))
        if not re.match(r"^[1-9][0-9]{0,9}$", raw["delay_after"]):
            raise JobOptionError("delay_after: %r is not a job id" % (raw["delay_after"],))
        out["delay_after"] = raw["delay_after"]
    return out
