#!/usr/bin/env python3
"""Runs one command and prints `<seconds> <peak RSS MiB>` for it.

Used by scripts/bench: wall time from a monotonic clock, peak resident
memory of the child from getrusage (the largest of the process tree's
members, as the kernel reports it).
"""
import resource
import subprocess
import sys
import time

start = time.monotonic()
proc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
elapsed = time.monotonic() - start
if proc.returncode != 0:
    sys.exit(f"measure: {sys.argv[1:]} exited {proc.returncode}")
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"{elapsed:.3f} {peak_kib / 1024:.1f}")
