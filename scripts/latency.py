#!/usr/bin/env python3
"""Commit-to-delivery latency of `chainship follow`, measured from outside.

Usage: latency.py CHAINSHIP_BIN WORK_DIR RATE SECONDS [follow flags...]

A writer commits RATE events a second for SECONDS, one transaction each,
chained as docs/chain-format.md says (WAL, synchronous=NORMAL, as a runtime
would), and notes the time each commit returned. A tailer reads the file
sink as the follower appends to it and notes when each seq's line appears.
Prints `<p50 ms> <p90 ms> <p99 ms> <max ms> <events>` of arrival minus commit,
with the follower at its default settings plus any flags given.
"""
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time


def netstring(b: bytes) -> bytes:
    return str(len(b)).encode() + b":" + b + b","


def event_hash(prev: str, seq: int, run_id: str, step_id: str, at: str, kind: str, payload: str) -> str:
    data = b"".join(
        netstring(x.encode())
        for x in (prev, str(seq), run_id, step_id, at, kind, payload)
    )
    return hashlib.sha256(data).hexdigest()


def main() -> None:
    binary, work, rate, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    extra = sys.argv[5:]
    os.makedirs(work, exist_ok=True)
    db, out, cursor = (os.path.join(work, n) for n in ("latency.db", "out.jsonl", "cursor"))
    for path in (db, db + "-wal", db + "-shm", out, cursor):
        if os.path.exists(path):
            os.remove(path)
    subprocess.run([binary, "generate", "--db", db, "--events", "100"], check=True, stdout=subprocess.DEVNULL)
    follower = subprocess.Popen(
        [binary, "follow", "--db", db, "--origin", "bench/latency", "--sink", "file:" + out,
         "--cursor", cursor, "--from-start", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "RUST_LOG": "error"},
    )
    arrived: dict[int, float] = {}
    done = threading.Event()

    def tail() -> None:
        while not os.path.exists(out):
            time.sleep(0.0005)
        with open(out, "rb") as f:
            partial = b""
            while not done.is_set():
                chunk = f.read()
                if not chunk:
                    time.sleep(0.0002)
                    continue
                now = time.monotonic()
                lines = (partial + chunk).split(b"\n")
                partial = lines.pop()
                for line in lines:
                    arrived[json.loads(line)["seq"]] = now

    tailer = threading.Thread(target=tail, daemon=True)
    tailer.start()
    while len(arrived) < 100:
        time.sleep(0.01)

    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    seq, prev = conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    committed: dict[int, float] = {}
    total = int(rate * seconds)
    start = time.monotonic()
    for n in range(total):
        due = start + n / rate
        while (left := due - time.monotonic()) > 0:
            time.sleep(min(left, 0.001))
        seq += 1
        at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z"
        payload = json.dumps({"tool": "http.get", "n": seq})
        h = event_hash(prev, seq, "run_latency", f"s{seq}", at, "tool.call", payload)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?,?,?,?,?,?,?)",
            (seq, "run_latency", f"s{seq}", at, "tool.call", payload, h),
        )
        conn.execute("COMMIT")
        committed[seq] = time.monotonic()
        prev = h
    deadline = time.monotonic() + 30
    while not all(s in arrived for s in committed) and time.monotonic() < deadline:
        time.sleep(0.01)
    done.set()
    follower.terminate()
    follower.wait()
    missing = [s for s in committed if s not in arrived]
    if missing:
        sys.exit(f"latency: {len(missing)} event(s) never arrived (first: seq {missing[0]})")
    lat = sorted((arrived[s] - t) * 1000 for s, t in committed.items())
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    print(f"{pick(0.5):.1f} {pick(0.9):.1f} {pick(0.99):.1f} {lat[-1]:.1f} {len(lat)}")


if __name__ == "__main__":
    main()
