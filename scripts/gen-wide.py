#!/usr/bin/env python3
"""A chained audit database built to fill the run check's tables with long
ids (the shapes of the attack rounds on its memory): one run holding 60,000
open steps, approvals or model calls with ~2 KB ids, or 30,000 open runs
with ~3 KB ids. For scripts/bench-run-memory.
Usage: gen-wide.py DB steps|approvals|models|runs"""
import hashlib, sqlite3, sys

AT = "2026-08-17T08:00:00Z"


def netstring(b):
    return str(len(b)).encode() + b":" + b + b","


def events(shape):
    if shape == "runs":
        for i in range(30_020):
            yield (f"r{i:09d}" + "y" * 3000, "", "run.created", "{}")
        return
    for i in range(1, 22):
        yield (f"r{i}", "", "run.created", "{}")
    if shape == "approvals":
        yield ("r1", "s", "step.started", "{}")
    for i in range(60_000):
        if shape == "steps":
            yield ("r1", f"s{i:09d}" + "x" * 2000, "step.started", "{}")
        elif shape == "approvals":
            yield ("r1", "s" + "z" * 2000, "approval.requested", '{"approval_id":"a%09d%s"}' % (i, "q" * 2000))
        elif shape == "models":
            yield ("r1", "s" + "z" * 2000, "model.dispatched", '{"call_id":"c%09d%s"}' % (i, "q" * 2000))
        else:
            sys.exit(f"gen-wide.py: unknown shape {shape!r} (steps, approvals, models or runs)")


def main():
    path, shape = sys.argv[1], sys.argv[2]
    db = sqlite3.connect(path)
    db.execute("""CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,
        step_id TEXT NOT NULL DEFAULT '', at TEXT NOT NULL, type TEXT NOT NULL,
        payload_json TEXT NOT NULL, hash TEXT NOT NULL DEFAULT '')""")
    prev, rows = b"", []
    for seq, (run, step, kind, payload) in enumerate(events(shape), start=1):
        fields = [prev, str(seq).encode(), run.encode(), step.encode(), AT.encode(), kind.encode(), payload.encode()]
        prev = hashlib.sha256(b"".join(netstring(f) for f in fields)).hexdigest().encode()
        rows.append((seq, run, step, AT, kind, payload, prev.decode()))
    db.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?)", rows)
    db.commit()


if __name__ == "__main__":
    main()
