# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""The sensor hierarchy (system → module → node → group → sensor) that hierarchical /search walks."""

import threading

from .payload import TopicPattern, is_pattern


class SensorTree:
    """Topics as a tree of levels, kept in memory: /search/<l1>/…/<ln> lists children without touching the store."""

    def __init__(self, topics=()):
        self._root = {}
        self._topics = set()
        self._lock = threading.Lock()
        for topic in topics:
            self.add(topic)

    def __len__(self):
        return len(self._topics)

    def add(self, topic):
        with self._lock:
            if topic in self._topics:
                return
            self._topics.add(topic)
            node = self._root
            for level in topic.strip("/").split("/"):
                node = node.setdefault(level, {})
            node[None] = True  # marks a sensor (a leaf; an inner level may also be a sensor)

    def _walk(self, levels):
        node = self._root
        for level in levels:
            node = node.get(level)
            if node is None:
                return None
        return node

    def children(self, levels):
        """Names one level below ``levels`` (both sub-levels and sensors), sorted; None if the path is unknown."""
        with self._lock:
            node = self._walk(levels)
            if node is None:
                return None
            return sorted(k for k in node if k is not None)

    def sensors_at(self, levels):
        """Full topics of the sensors directly below ``levels``."""
        with self._lock:
            node = self._walk(levels)
            if node is None:
                return None
            base = "/" + "/".join(levels) if levels else ""
            return sorted(base + "/" + k for k, child in node.items() if k is not None and child.get(None))

    def is_sensor(self, topic):
        return topic in self._topics

    def topics(self):
        with self._lock:
            return sorted(self._topics)

    def expand(self, target, limit=1000):
        """A sensor name or pattern → matching sensor topics (sorted, at most ``limit``)."""
        if not is_pattern(target):
            return [target] if target in self._topics else []
        pattern = TopicPattern(target)
        return [t for t in self.topics() if pattern.match(t)][:limit]

    def nodes_named(self, hostname, depth=3):
        """Node prefixes (``/<system>/<module>/<hostname>``) whose node level is ``hostname``."""
        out = set()
        for topic in self.topics():
            levels = topic.strip("/").split("/")
            if len(levels) > depth and levels[depth - 1] == hostname:
                out.add("/" + "/".join(levels[:depth]))
        return sorted(out)
