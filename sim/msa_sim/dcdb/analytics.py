# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Streaming operators of the Collect Agent (a small Wintermute): output sensors computed as readings arrive.

Configured in the ``analytics`` section of collectagent.conf, one ``operator <name> { ... }`` block each:
``type`` (``average``: moving average; ``jobenergy``: integral of power per job), ``input`` (a sensor pattern,
``+``/``*`` match one level), ``output`` (the output sensor name; ``%s`` is replaced by the input sensor's name).
Outputs are written as ``/<system>/<module>/<node>/analytics/<output>`` in the same transaction as the inputs.
"""

import collections

from .info import DcdbConfigError, as_int
from .payload import TopicPattern, node_prefix


class Operator:
    def __init__(self, name, spec):
        self.name = name
        self.input = spec.value_of("input")
        if not self.input:
            raise DcdbConfigError("operator %s: input (a sensor pattern) is required" % name)
        self.pattern = TopicPattern(self.input)
        self.output = spec.value_of("output") or name
        self.produced = 0

    def output_topic(self, topic):
        sensor = topic.rsplit("/", 1)[-1]
        name = self.output.replace("%s", sensor)
        return node_prefix(topic) + "/analytics/" + name

    def matches(self, topic):
        return self.pattern.match(topic) and "/analytics/" not in topic

    def feed(self, topic, ts, value, jobs):
        """Return output readings [(topic, ts, value)] and energy rows [(jobid, node, joules)]."""
        raise NotImplementedError


class MovingAverage(Operator):
    """Mean of the input's readings within the last ``window`` ms (or the last ``samples`` readings)."""

    def __init__(self, name, spec):
        super().__init__(name, spec)
        self.window_ns = as_int(spec.value_of("window"), 10000, "operator %s window" % name) * 1000000
        self.samples = as_int(spec.value_of("samples"), 0, "operator %s samples" % name)
        self._series = collections.defaultdict(collections.deque)
        self._sums = collections.defaultdict(float)

    def feed(self, topic, ts, value, jobs):
        series = self._series[topic]
        if series and ts <= series[-1][0]:
            return [], []  # late or duplicate reading: the average has moved on
        series.append((ts, value))
        self._sums[topic] += value
        while series and ((self.samples and len(series) > self.samples)
                          or (not self.samples and series[0][0] <= ts - self.window_ns)):
            self._sums[topic] -= series.popleft()[1]
        self.produced += 1
        return [(self.output_topic(topic), ts, self._sums[topic] / len(series))], []


class JobEnergy(Operator):
    """Energy (J) of the jobs on a node: trapezoidal integral of its power readings while a job runs there.

    The output sensor holds the running total of the node's current job; the per-job, per-node totals go to the
    store's job_energy table (``GET /job/<id>`` sums them). A node shared by several jobs counts its whole power for
    each of them, since node power cannot be split between jobs.
    """

    def __init__(self, name, spec):
        super().__init__(name, spec)
        self.factor = float(spec.value_of("factor", "1") or 1)  # input unit → W (e.g. 0.001 for mW)
        self._last = {}
        self._totals = collections.defaultdict(float)

    def feed(self, topic, ts, value, jobs):
        node = node_prefix(topic)
        last = self._last.get(node)
        self._last[node] = (ts, value)
        if last is None or ts <= last[0]:
            return [], []
        before = set(jobs(node, last[0]))
        running = [j for j in jobs(node, ts) if j in before]  # both ends of the interval inside the job
        if not running:
            return [], []
        joules = (last[1] + value) / 2.0 * self.factor * (ts - last[0]) / 1e9
        energy = []
        for jobid in running:
            self._totals[(jobid, node)] += joules
            energy.append((jobid, node, joules))
        self.produced += 1
        return [(self.output_topic(topic), ts, round(self._totals[(running[-1], node)], 3))], energy


OPERATOR_TYPES = {"average": MovingAverage, "movingaverage": MovingAverage, "jobenergy": JobEnergy}


def load_operators(section):
    """Operators from the ``analytics`` section (an InfoNode or None)."""
    if section is None:
        return []
    out = []
    for entry in section.get_all("operator", "analyzer"):
        kind = (entry.value_of("type") or "").lower()
        if kind not in OPERATOR_TYPES:
            raise DcdbConfigError("operator %s: type %r must be one of %s" % (entry.value, kind,
                                                                              ", ".join(sorted(OPERATOR_TYPES))))
        out.append(OPERATOR_TYPES[kind](entry.value, entry))
    return out


def run_operators(operators, readings, jobs):
    """Feed a batch of readings to every operator whose pattern matches; return (outputs, energy rows)."""
    outputs, energy = [], []
    if not operators:
        return outputs, energy
    for topic, ts, value in readings:
        for op in operators:
            if op.matches(topic):
                out, rows = op.feed(topic, ts, value, jobs)
                outputs.extend(out)
                energy.extend(rows)
    return outputs, energy
