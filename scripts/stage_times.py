#!/usr/bin/env python3
"""Print how long each stage of a test log took, and its slowest plays, from the log's own time stamps.

`make` prints `[HH:MM:SS] == <stage>` when a stage starts (scripts/lib.sh, the Makefile's STEP) and the
msa.hpc.progress output prints `[HH:MM:SS] -- play <name>` when a play starts. A stage or play lasts until the
next line of its kind (a stage until the next stage, a play until the next play or stage). Times are wall-clock
times of one day; a run across midnight is handled by adding a day whenever the clock goes back.
Usage: stage_times.py LOG [SLOWEST]   (SLOWEST: how many plays to list, default 12)
"""
import re
import sys

# at the start of a line, or of a line molecule framed; a stamp inside other output (a runner's log echoed in a
# task's message) is not one of this run's stages
STAMP = re.compile(r"^\s*(?:[│┃|]\s*)?\[(\d\d):(\d\d):(\d\d)\] (==|--) (?:play )?(.*?)\s*$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def events(lines):
    """The log's stamps as (seconds since the first day's midnight, kind '==' or '--', name)."""
    day = last = 0
    for raw in lines:
        match = STAMP.match(ANSI.sub("", raw))
        if not match:
            continue
        hours, minutes, seconds, kind, name = match.groups()
        now = int(hours) * 3600 + int(minutes) * 60 + int(seconds) + day
        if now < last:  # the clock passed midnight
            day += 86400
            now += 86400
        last = now
        yield now, kind, name


def durations(lines, end=None):
    """Stages and plays with their durations: ([(stage, seconds)], [(play, stage, seconds)])."""
    stages, plays = [], []
    stage = play = None
    for now, kind, name in events(lines):
        if play is not None:
            plays.append((play[1], play[2], now - play[0]))
            play = None
        if kind == "==":
            if stage is not None:
                stages.append((stage[1], now - stage[0]))
            stage = (now, name)
        else:
            play = (now, name, stage[1] if stage else "")
        end = now if end is None or now > end else end
    if play is not None:
        plays.append((play[1], play[2], end - play[0]))
    if stage is not None:
        stages.append((stage[1], end - stage[0]))
    return stages, plays


def fmt(seconds):
    return "%d:%02d" % divmod(int(seconds), 60)


def report(lines, slowest=12):
    """The printed summary, as a list of lines."""
    stages, plays = durations(lines)
    if not stages:
        return ["stage times: no time stamps in the log"]
    out = ["stage times (m:ss):"]
    out += ["  %7s  %s" % (fmt(secs), name) for name, secs in stages]
    out.append("  %7s  total" % fmt(sum(secs for _, secs in stages)))
    if plays:
        out.append("slowest plays (m:ss):")
        for name, stage, secs in sorted(plays, key=lambda p: -p[2])[:slowest]:
            out.append("  %7s  %s  (in: %s)" % (fmt(secs), name, stage))
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8", errors="replace") as log:
        lines = log.readlines()
    print("\n".join(report(lines, int(argv[2]) if len(argv) > 2 else 12)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
