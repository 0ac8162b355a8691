#!/usr/bin/env python3
"""Print the failures found in a test log, compactly, so that the last lines of the log name them.

Used by .ci/run when `make test` fails: only the tail of a CI log is kept, and a molecule or
pytest failure is usually far above it. Reads the log (ANSI colours stripped) and prints, for
each failure, the Ansible task (play and task name) or pytest node that failed and the first
part of its message.  Usage: failure_summary.py LOG [MAX]
"""
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# molecule frames the output of the playbooks it runs; scripts/test.sh prefixes the suites it ran beside molecule
FRAME = re.compile(r"^\s*(?:beside \| |[│┃|]\s?)?")
TASK = re.compile(r"^(TASK|PLAY) \[(.*?)\]")
HEADER_START = re.compile(r"^(TASK|PLAY) \[[^\]]*$")  # a long header molecule wrapped onto the next line
FATAL = re.compile(r"^(fatal|failed): \[([^\]]+)\].*?(=>|:)\s*(.*)$")
PYTEST = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")
SANITY = re.compile(r"^ERROR: (.*)$")
MSG = re.compile(r'"msg": "((?:[^"\\]|\\.)*)"')


def summarize(lines, limit=6, width=600):
    """Return the failures of a log as ('where', 'what') pairs (at most `limit`) and their count."""
    play = task = ""
    found = []
    block = None  # the failure whose message (the lines after it) is being read
    header = ""  # the first part of a wrapped TASK or PLAY header
    for raw in lines:
        line = FRAME.sub("", ANSI.sub("", raw), count=1).rstrip()
        if header:
            line, header = header + " " + line.strip(), ""
        if HEADER_START.match(line):
            header = line
            continue
        if line.strip() == "...ignoring":  # the task's failures were ignored (ignore_errors)
            found = [f for f in found if not f[0].endswith(" / " + task)]
            block = None
            continue
        if block is not None:
            if line.strip() and not TASK.match(line) and len(block[1]) < 12:
                block[1].append(line.strip())
                continue
            block = None
        m = TASK.match(line)
        if m:
            if m.group(1) == "PLAY":
                play = m.group(2)
            else:
                task = m.group(2)
            continue
        m = FATAL.match(line)
        if m and "...ignoring" not in line:
            block = (f"{m.group(2)}: {play} / {task}", [m.group(4)])
            found.append(block)
            continue
        m = PYTEST.match(line)
        if m:
            found.append((m.group(2), [m.group(3) or m.group(1)]))
            continue
        m = SANITY.match(line)
        if m:
            found.append(("ansible-test", [m.group(1)]))
    return [(where, _message(parts, width)) for where, parts in found[:limit]], len(found)


def _message(parts, width):
    """The message of a failure: its msg field when there is one, else its text, on one line."""
    text = " ".join(p for p in parts if p and p != "FAILED! =>")
    msg = MSG.search(text) or re.search(r"\bmsg: (.*)", text)
    return (msg.group(1) if msg else text)[:width]


def main(argv):
    path = argv[1]
    limit = int(argv[2]) if len(argv) > 2 else 6
    with open(path, encoding="utf-8", errors="replace") as log:
        shown, total = summarize(log, limit)
    print(f"== failures found in the log ({total}, first {len(shown)}):")
    for where, what in shown:
        print(f"-- {where}\n   {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
