#!/usr/bin/env python3
"""Interleaved wall times of `agentctl version` for two or more builds.

    python3 test/bench/version.py ROUNDS NAME=BINARY NAME=BINARY ...

Each round runs every binary once, in turn, so the machine's load falls
on all of them alike; prints each binary's median, min and max in ms
(docs/benchmarks.md).
"""
import statistics
import subprocess
import sys
import time


def main():
    rounds = int(sys.argv[1])
    bins = dict(arg.split("=", 1) for arg in sys.argv[2:])
    times = {name: [] for name in bins}
    for _ in range(rounds):
        for name, path in bins.items():
            start = time.perf_counter()
            subprocess.run([path, "version"], stdout=subprocess.DEVNULL, check=True)
            times[name].append((time.perf_counter() - start) * 1000)
    for name, t in times.items():
        print(f"{name}: median {statistics.median(t):.2f} ms (min {min(t):.2f}, max {max(t):.2f}), {len(t)} rounds")


if __name__ == "__main__":
    main()
