# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Gateway routing files (seed 004 §4.3.1): the format, and pluggable strategies mapping node pairs to gateways."""

import importlib.util
import os
import re
import stat

try:
    import numpy as np
except ImportError:  # pragma: no cover - the sanity import test runs without numpy
    np = None

# Where a site drops its own strategies (one ``<name>.py`` per strategy); MSA_GW_ROUTE_PLUGIN_PATH adds more.
DEFAULT_PLUGIN_DIRS = ("/etc/msa-gw/routing.d",)
_STRATEGY_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CHUNK_ROWS = 1 << 17  # rows formatted per numpy block: bounds memory to a few MB for any file size
_MAX_REPORTED = 10
SECRET_SUFFIX = ".secret"


class RoutingError(ValueError):
    """A routing table cannot be built (bad nodes, gateways or strategy); the message says which."""


class RoutingFileError(RoutingError):
    """A routing file is malformed; ``errors`` holds ``(line number, message)`` for each bad line found."""

    def __init__(self, source, errors):
        self.source = source
        self.errors = list(errors)
        shown = "; ".join("line %d: %s" % e for e in self.errors[:_MAX_REPORTED])
        more = len(self.errors) - _MAX_REPORTED
        if more > 0:
            shown += "; and %d more" % more
        super().__init__("%s: %s" % (source, shown))

    @property
    def line(self):
        return self.errors[0][0] if self.errors else None


def _need_numpy():
    if np is None:
        raise RoutingError("gateway routing needs numpy (python3-numpy) on the host that writes routing files")


def natural_key(name):
    """Sort key that orders cluster2 before cluster10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(name))]


def parse_endpoint(text):
    """``host:port`` (``[v6]:port`` for IPv6) → ``(host, port)``; raise RoutingError naming the value."""
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d+)|([^\s:\[\]]+):(\d+)", str(text))
    if not m:
        raise RoutingError("gateway %r is not <address>:<port>" % (text,))
    host = m.group(1) or m.group(3)
    port = int(m.group(2) or m.group(4))
    if not 0 < port < 65536:
        raise RoutingError("gateway %r has port %d outside 1-65535" % (text, port))
    return host, port


def format_endpoint(host, port):
    return ("[%s]:%d" if ":" in str(host) else "%s:%d") % (host, int(port))


class RoutingTable:
    """Routes as index arrays over three name lists: line i is ``gateways[g[i]] clusters[c[i]] boosters[b[i]]``."""

    def __init__(self, gateways, clusters, boosters, g, c, b):
        _need_numpy()
        self.gateways = list(gateways)
        self.clusters = list(clusters)
        self.boosters = list(boosters)
        self.g = np.asarray(g, dtype=np.int32)
        self.c = np.asarray(c, dtype=np.int32)
        self.b = np.asarray(b, dtype=np.int32)

    @classmethod
    def from_assignment(cls, gateways, clusters, boosters, assignment):
        """Full table from a (clusters × boosters) matrix of gateway indices, lines ordered booster by booster."""
        _need_numpy()
        a = np.asarray(assignment)
        n_c, n_b = len(clusters), len(boosters)
        k = np.arange(n_c * n_b, dtype=np.int64)
        c, b = k % n_c, k // n_c
        return cls(gateways, clusters, boosters, a[c, b], c, b)

    def __len__(self):
        return int(self.g.shape[0])

    def __eq__(self, other):
        if not isinstance(other, RoutingTable):
            return NotImplemented
        return self.routes() == other.routes()

    def routes(self):
        """All routes as a set of ``(gateway, cluster, booster)`` name triples (order-free comparison)."""
        gw, cl, bo = np.array(self.gateways, dtype=object), np.array(self.clusters, dtype=object), \
            np.array(self.boosters, dtype=object)
        return set(zip(gw[self.g], cl[self.c], bo[self.b]))

    def matrix(self):
        """(clusters × boosters) gateway indices; -1 where a pair has no route."""
        m = np.full((len(self.clusters), len(self.boosters)), -1, dtype=np.int32)
        m[self.c, self.b] = self.g
        return m

    def load(self):
        """Number of node pairs routed through each gateway, as ``{gateway: pairs}``."""
        counts = np.bincount(self.g, minlength=len(self.gateways))
        return {gw: int(n) for gw, n in zip(self.gateways, counts)}

    def booster_gateways(self):
        """``{booster: sorted gateways its pairs use}`` — one entry each under the ``booster`` strategy."""
        out = {}
        for b in range(len(self.boosters)):
            used = np.unique(self.g[self.b == b])
            out[self.boosters[b]] = [self.gateways[i] for i in used]
        return out

    def lookup(self, node, peer):
        """Gateway for the pair (node, peer), whichever side each is on; None when the file has no route."""
        for a, z in ((node, peer), (peer, node)):
            if a in self.clusters and z in self.boosters:
                ci, bi = self.clusters.index(a), self.boosters.index(z)
                hit = np.flatnonzero((self.c == ci) & (self.b == bi))
                return self.gateways[int(self.g[hit[0]])] if hit.size else None
        return None

    def to_bytes(self):
        return format_routing(self)

    def to_text(self):
        return format_routing(self).decode("utf-8")


# --------------------------------------------------------------------------- writing

def _token_matrix(names, suffix):
    """Names as a zero-padded uint8 matrix (one row per name, ``suffix`` appended) for vectorised formatting."""
    enc = [str(n).encode("utf-8") + suffix for n in names]
    width = max(len(e) for e in enc)
    return np.array(enc, dtype="S%d" % width).view(np.uint8).reshape(len(enc), width)


def format_routing(table):
    """The routing file as bytes: ``<gateway>:<port> <cluster node> <booster node>`` per line.

    Each chunk of lines is laid out as a fixed-width byte matrix (names zero-padded) and the padding
    is dropped in one boolean selection, so a million lines cost a few numpy passes, not a Python loop.
    """
    _need_numpy()
    if len(table) == 0:
        return b""
    gw = _token_matrix(table.gateways, b" ")
    cl = _token_matrix(table.clusters, b" ")
    bo = _token_matrix(table.boosters, b"\n")
    parts = []
    for start in range(0, len(table), _CHUNK_ROWS):
        sl = slice(start, start + _CHUNK_ROWS)
        block = np.hstack((gw[table.g[sl]], cl[table.c[sl]], bo[table.b[sl]]))
        flat = block.ravel()
        parts.append(flat[flat != 0].tobytes())
    return b"".join(parts)


def write_routing_file(path, table, mode=0o644):
    """Write atomically (temporary file, then rename) so a job never reads half a routing file."""
    return write_atomic(path, format_routing(table), mode)


def write_atomic(path, data, mode=0o644):
    """Write ``data`` (bytes) to ``path`` through a temporary file and a rename; returns the byte count."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, ".%s.tmp%d" % (os.path.basename(path), os.getpid()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return len(data)


# --------------------------------------------------------------------------- parsing

_WHITESPACE = None if np is None else np.isin(np.arange(256), list(b" \t\n\r\x0b\x0c"))


def parse_routing(data, source="<routing file>"):
    """Parse routing-file text or bytes into a RoutingTable; blank lines and ``#`` comments are skipped.

    Raise RoutingFileError with the line numbers of every line that is not three fields, every gateway that
    is not ``<address>:<port>``, every node pair routed twice and every node named on both sides.
    """
    _need_numpy()
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not data.endswith(b"\n"):
        data += b"\n"
    buf = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(buf == 10)
    n_lines = newlines.size
    space = _WHITESPACE[buf]
    is_start = ~space
    is_start[1:] &= space[:-1]
    starts = np.flatnonzero(is_start)
    tok_line = np.searchsorted(newlines, starts)  # 0-based line of each token
    fields = np.bincount(tok_line, minlength=n_lines)
    first = np.ones(starts.size, dtype=bool)
    first[1:] = tok_line[1:] != tok_line[:-1]
    comment = np.zeros(n_lines, dtype=bool)
    comment[tok_line[first & (buf[starts] == ord("#"))]] = True

    errors = []
    bad = np.flatnonzero((fields != 0) & (fields != 3) & ~comment)
    for ln in bad[:_MAX_REPORTED * 10]:
        errors.append((int(ln) + 1, "expected '<gateway address>:<port> <cluster node> <booster node>', found %d "
                       "field%s" % (fields[ln], "" if fields[ln] == 1 else "s")))
    if errors:
        raise RoutingFileError(source, errors)

    tokens = data.split()
    if comment.any():
        keep = ~comment[tok_line]
        tokens = [t for t, k in zip(tokens, keep.tolist()) if k]
    data_lines = np.flatnonzero(fields == 3) + 1  # 1-based line number of row i
    data_lines = data_lines[~comment[data_lines - 1]]
    names, idx = [], []
    for col in range(3):
        seen = {}
        intern = seen.setdefault
        idx.append(np.array([intern(t, len(seen)) for t in tokens[col::3]], dtype=np.int32))
        names.append([t.decode("utf-8", "replace") for t in seen])
    g, c, b = idx
    gateways, clusters, boosters = names

    def first_line(col_idx, value):
        return int(data_lines[int(np.argmax(col_idx == value))])

    for k, gw in enumerate(gateways):
        try:
            parse_endpoint(gw)
        except RoutingError as exc:
            errors.append((first_line(g, k), str(exc)))
    both = set(clusters) & set(boosters)
    for name in sorted(both, key=natural_key):
        as_booster, as_cluster = first_line(b, boosters.index(name)), first_line(c, clusters.index(name))
        here, there = ("booster", "cluster") if as_booster > as_cluster else ("cluster", "booster")
        errors.append((max(as_booster, as_cluster), "node %r is a %s node here but a %s node on line %d"
                       % (name, here, there, min(as_booster, as_cluster))))
    if len(g):
        code = c.astype(np.int64) * max(len(boosters), 1) + b
        order = np.argsort(code, kind="stable")
        dup = np.flatnonzero(code[order][1:] == code[order][:-1])
        for d in dup[:_MAX_REPORTED]:
            a, z = order[d], order[d + 1]
            errors.append((int(data_lines[z]), "pair %s %s already routed on line %d"
                           % (clusters[c[z]], boosters[b[z]], int(data_lines[a]))))
    if errors:
        errors.sort()
        raise RoutingFileError(source, errors)
    return RoutingTable(gateways, clusters, boosters, g, c, b)


def read_routing_file(path):
    with open(path, "rb") as fh:
        return parse_routing(fh.read(), source=path)


def find_gateway(path, node, peer):
    """Stream a routing file for the gateway of (node, peer) in either column order, without building arrays.

    This is what a process does at connection setup: it knows its own node and its peer's. Return
    ``(gateway endpoint, side)`` where side is ``"cluster"`` or ``"booster"`` for ``node``, or None.
    """
    with open(path, "r", encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) != 3 or parts[0].startswith("#"):
                continue
            if parts[1] == node and parts[2] == peer:
                return parts[0], "cluster"
            if parts[2] == node and parts[1] == peer:
                return parts[0], "booster"
    return None


def secret_file(routing_file):
    """Where the prolog puts the job's gateway secret (which its psgwd asks of every connection): beside the
    routing file, readable by the job's user only."""
    return routing_file + SECRET_SUFFIX


# --------------------------------------------------------------------------- strategies

_STRATEGIES = {}


def register_strategy(name, func=None):
    """Register ``func(clusters, boosters, gateways, **options) -> (C, B) int array``; usable as a decorator."""
    def add(f):
        _STRATEGIES[str(name)] = f
        return f
    return add(func) if func is not None else add


@register_strategy("balance")
def route_balance(clusters, boosters, gateways, **_options):
    """Pairs numbered booster by booster go round-robin over the gateways: per-gateway counts differ by ≤ 1."""
    n_c, n_b = len(clusters), len(boosters)
    k = np.arange(n_c * n_b, dtype=np.int64).reshape(n_b, n_c).T
    return (k % len(gateways)).astype(np.int32)


@register_strategy("booster")
def route_booster(clusters, boosters, gateways, **_options):
    """Every booster node talks through one gateway; booster nodes are spread evenly (counts differ by ≤ 1)."""
    per_booster = (np.arange(len(boosters)) % len(gateways)).astype(np.int32)
    return np.broadcast_to(per_booster, (len(clusters), len(boosters))).copy()


@register_strategy("cluster")
def route_cluster(clusters, boosters, gateways, **_options):
    """Every cluster node talks through one gateway; cluster nodes are spread evenly (counts differ by ≤ 1)."""
    per_cluster = (np.arange(len(clusters)) % len(gateways)).astype(np.int32)
    return np.broadcast_to(per_cluster[:, None], (len(clusters), len(boosters))).copy()


def plugin_search_path(extra=None):
    """The plugin directories: those the caller names (the pool file's, the module's), then the default one.
    Never from the environment: the hooks act for jobs, whose submitters must not choose what code runs."""
    dirs = [str(d) for d in (extra or []) if d]
    return dirs + [d for d in DEFAULT_PLUGIN_DIRS if d not in dirs]


def check_trusted(path, kind, owner=0):
    """Refuse a plugin directory or file that someone other than root could have written: it must be owned by
    root and writable by neither its group nor others (checked on the object itself, not through a link)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise RoutingError("routing plugin %s %s cannot be read: %s" % (kind, path, exc.strerror)) from None
    want = stat.S_ISDIR if kind == "directory" else stat.S_ISREG
    if not want(st.st_mode):
        raise RoutingError("routing plugin %s %s is not a plain %s (symbolic links are not followed)"
                           % (kind, path, kind))
    if st.st_uid != owner:
        raise RoutingError("routing plugin %s %s is owned by uid %d, not root: refused" % (kind, path, st.st_uid))
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise RoutingError("routing plugin %s %s is writable by its group or others (mode %04o): refused"
                           % (kind, path, stat.S_IMODE(st.st_mode)))
    return path


def check_strategy_name(spec, field="gw_plugin"):
    """A strategy is asked for by bare name only: no path, no '..', no module:function."""
    text = str(spec if spec is not None else "")
    if not _STRATEGY_NAME.match(text):
        raise RoutingError("%s: %r is not a routing strategy name (letters, digits, '_' and '-' only: "
                           "no path, no '..', no module:function)" % (field, spec))
    spec = text
    return spec


def available_strategies(search_path=None, owner=0):
    """Names usable as ``--gw_plugin``: the built-ins and every ``<name>.py`` in the trusted plugin directories."""
    names = set(_STRATEGIES)
    for d in plugin_search_path(search_path):
        if os.path.isdir(d):
            try:
                check_trusted(d, "directory", owner)
            except RoutingError:
                continue
            names.update(f[:-3] for f in os.listdir(d) if f.endswith(".py") and _STRATEGY_NAME.match(f[:-3]))
    return sorted(names)


def _load_file(path):
    name = "msa_gw_route_plugin_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RoutingError("routing plugin %r cannot be loaded as Python" % (path,))
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise RoutingError("routing plugin %r failed to load: %s" % (path, exc))
    return module


def _from_module(module, where):
    """A plugin module offers ``route`` (vectorised), or the ParaStation psgw hooks ``routeConnectionS/X``."""
    if callable(getattr(module, "route", None)):
        return module.route
    per_pair_s = getattr(module, "routeConnectionS", None)
    per_pair_x = getattr(module, "routeConnectionX", None)
    if callable(per_pair_s) or callable(per_pair_x):
        return _psgw_adapter(per_pair_s, per_pair_x, where)
    raise RoutingError("routing plugin %s defines neither route() nor routeConnectionS()/routeConnectionX()" % where)


def _psgw_adapter(per_pair_s, per_pair_x, where):
    """Wrap a psgw-style per-pair plugin (one Python call per pair: compatible, not fast)."""
    def route(clusters, boosters, gateways, **_options):
        out = np.empty((len(clusters), len(boosters)), dtype=np.int32)
        gw_index = {gw: i for i, gw in enumerate(gateways)}
        for i, a in enumerate(clusters):
            for j, z in enumerate(boosters):
                if per_pair_s is not None:
                    err, gw = per_pair_s(len(clusters), len(boosters), len(gateways), i, j)
                else:
                    err, name = per_pair_x(clusters, boosters, gateways, a, z)
                    gw = gw_index.get(name, -1)
                if err is not None:
                    raise RoutingError("routing plugin %s failed for pair %s %s: %s" % (where, a, z, err))
                out[i, j] = gw
        return out
    return route


def resolve_strategy(spec, search_path=None, owner=0, field="gw_plugin"):
    """A strategy by bare name: a built-in, or ``<name>.py`` in the first plugin directory that has it, where the
    directory and the file must be root's and writable by no one else (``owner`` is for tests only)."""
    spec = check_strategy_name(spec, field)
    if spec in _STRATEGIES:
        return _STRATEGIES[spec]
    for d in plugin_search_path(search_path):
        path = os.path.join(d, spec + ".py")
        if os.path.lexists(path):
            try:
                check_trusted(d, "directory", owner)
                check_trusted(path, "file", owner)
            except RoutingError as exc:
                raise RoutingError("%s: %s" % (field, exc)) from None
            return _from_module(_load_file(path), repr(path))
    raise RoutingError("%s: unknown routing strategy %r (known: %s)"
                       % (field, spec, ", ".join(available_strategies(search_path, owner))))


def _check_names(kind, names):
    names = [str(n) for n in names]
    if not names:
        raise RoutingError("no %s nodes given" % kind)
    seen = set()
    for n in names:
        if not n or any(ch.isspace() for ch in n) or n.startswith("#"):
            raise RoutingError("%s node name %r cannot appear in a routing file" % (kind, n))
        if n in seen:
            raise RoutingError("%s node %r is listed twice" % (kind, n))
        seen.add(n)
    return sorted(names, key=natural_key)


def build_routing(clusters, boosters, gateways, strategy="balance", search_path=None, options=None):
    """Map every (cluster node, booster node) pair to one of ``gateways`` (``addr:port`` strings).

    Node lists are sorted naturally first, so the result depends on the sets of nodes, not their order.
    """
    _need_numpy()
    clusters = _check_names("cluster", clusters)
    boosters = _check_names("booster", boosters)
    gateways = [str(g) for g in gateways]
    if not gateways:
        raise RoutingError("no gateways given: a routing file needs at least one gateway")
    if len(set(gateways)) != len(gateways):
        raise RoutingError("gateway endpoints are not unique: %s" % ", ".join(gateways))
    for gw in gateways:
        parse_endpoint(gw)
    both = set(clusters) & set(boosters)
    if both:
        raise RoutingError("nodes %s are given as both cluster and booster nodes" % ", ".join(sorted(both)))
    func = resolve_strategy(strategy, search_path) if not callable(strategy) else strategy
    name = getattr(func, "__name__", str(strategy))
    try:
        result = func(clusters, boosters, gateways, **(options or {}))
    except RoutingError:
        raise
    except Exception as exc:
        raise RoutingError("routing strategy %s failed: %s: %s" % (name, type(exc).__name__, exc))
    a = np.asarray(result)
    if a.shape != (len(clusters), len(boosters)):
        raise RoutingError("routing strategy %s returned shape %s, expected (%d, %d)"
                           % (name, a.shape, len(clusters), len(boosters)))
    if a.dtype.kind not in "iu":
        raise RoutingError("routing strategy %s returned %s values, expected gateway indices" % (name, a.dtype))
    if a.size and (a.min() < 0 or a.max() >= len(gateways)):
        raise RoutingError("routing strategy %s returned gateway index %d outside 0-%d"
                           % (name, int(a.min() if a.min() < 0 else a.max()), len(gateways) - 1))
    return RoutingTable.from_assignment(gateways, clusters, boosters, a)
