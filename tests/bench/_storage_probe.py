# SPDX-License-Identifier: GPL-3.0-or-later
"""The measuring program of tests/bench/bench_storage.py, run on a node with its python3 (standard library only):
for each directory given, sequential write and read throughput of one file and small-file metadata operations.

  --dir LABEL=PATH     a directory to measure (repeatable): the shared file system and the node's local disk
  --size-mib N         the big file's size (written with fsync, read back with O_DIRECT where the file system
                       allows it, else through the page cache, which the result then says)
  --files N            small files: each created with 4 KiB, then all stat()ed, then all removed
  --net IFACE,...      network interfaces whose byte counters are read before and after each directory

Prints one line `RESULT {json}`: per label the throughputs (MiB/s), the metadata operations per second, whether
the read was direct, and the bytes each interface sent and received meanwhile.
"""
import argparse
import json
import mmap
import os
import sys
import time

CHUNK = 1 << 20


def counters(ifaces):
    out = {}
    for iface in ifaces:
        base = "/sys/class/net/%s/statistics/" % iface
        try:
            with open(base + "tx_bytes") as tx, open(base + "rx_bytes") as rx:
                out[iface] = [int(tx.read()), int(rx.read())]
        except OSError:
            out[iface] = None
    return out


def write_file(path, size_mib):
    block = os.urandom(CHUNK)
    start = time.monotonic()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for dummy in range(size_mib):
            os.write(fd, block)
        os.fsync(fd)
    finally:
        os.close(fd)
    return size_mib / (time.monotonic() - start)


def read_file(path, size_mib):
    """(MiB/s, direct): O_DIRECT needs an aligned buffer (an anonymous mmap is page-aligned)."""
    direct = True
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        direct, fd = False, os.open(path, os.O_RDONLY)
    buf = mmap.mmap(-1, CHUNK)
    start = time.monotonic()
    try:
        total = 0
        while True:
            try:
                n = os.readv(fd, [buf])
            except OSError:
                if not direct or total:
                    raise
                os.close(fd)      # the file system refused O_DIRECT at the first read: read it through the cache
                direct, fd = False, os.open(path, os.O_RDONLY)
                start = time.monotonic()
                continue
            if n == 0:
                break
            total += n
    finally:
        os.close(fd)
        buf.close()
    if total != size_mib * CHUNK:
        raise RuntimeError("%s: read %d bytes of %d" % (path, total, size_mib * CHUNK))
    return size_mib / (time.monotonic() - start), direct


def metadata(directory, files):
    data = b"x" * 4096
    names = [os.path.join(directory, "f%05d" % i) for i in range(files)]
    start = time.monotonic()
    for name in names:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, data)
        os.close(fd)
    created = time.monotonic()
    for name in names:
        os.stat(name)
    statted = time.monotonic()
    for name in names:
        os.unlink(name)
    done = time.monotonic()
    return {"create_per_s": files / (created - start), "stat_per_s": files / (statted - created),
            "unlink_per_s": files / (done - statted)}


def measure(label, path, size_mib, files, ifaces):
    work = os.path.join(path, "msa-bench-storage.%d" % os.getpid())
    os.mkdir(work, 0o700)
    before = counters(ifaces)
    try:
        big = os.path.join(work, "big")
        write = write_file(big, size_mib)
        read, direct = read_file(big, size_mib)
        os.unlink(big)
        result = {"write_mib_s": write, "read_mib_s": read, "read_direct": direct}
        result.update(metadata(work, files))
    finally:
        for name in os.listdir(work):
            os.unlink(os.path.join(work, name))
        os.rmdir(work)
    after = counters(ifaces)
    result["net"] = {i: (None if before[i] is None or after[i] is None else
                         {"tx": after[i][0] - before[i][0], "rx": after[i][1] - before[i][1]}) for i in ifaces}
    result["label"], result["path"] = label, path
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", action="append", required=True)
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--net", default="")
    args = ap.parse_args()
    ifaces = [i for i in args.net.split(",") if i]
    results = []
    for spec in args.dir:
        label, sep, path = spec.partition("=")
        if not sep or not os.path.isdir(path):
            print("ERROR --dir %r: not LABEL=DIRECTORY" % spec, file=sys.stderr)
            return 2
        results.append(measure(label, path, args.size_mib, args.files, ifaces))
    print("RESULT " + json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
