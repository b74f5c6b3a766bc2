#!/usr/bin/env python3
"""A chained audit database built to fill the run check's tables with long
ids (the shapes of the attack rounds on its memory): one run holding 60,000
open steps, approvals or model calls with ~2 KB ids, or 30,000 open runs
with ~3 KB ids; or 20,000 open runs, each with a step, a tool start, an
approval and a model call (mixed:N) or one model call (calls:N), with ids
of N bytes. For scripts/bench-run-memory.
Usage: gen-wide.py DB steps|approvals|models|runs|mixed:N|calls:N"""
import hashlib, sqlite3, sys

AT = "2026-08-17T08:00:00Z"


def netstring(b):
    return str(len(b)).encode() + b":" + b + b","


def events(shape):
    if shape == "runs":
        for i in range(30_020):
            yield (f"r{i:09d}" + "y" * 3000, "", "run.created", "{}")
        return
    if shape.startswith(("mixed:", "calls:")):
        # 20,000 runs, each holding a step with a tool start, an approval and
        # a model call (mixed) or one model call (calls), ids of N bytes.
        kind, n = shape.split(":")
        pad = lambda prefix, i: (f"{prefix}{i:06d}" + "p" * int(n))[: max(int(n), 7)]
        for i in range(20_000):
            run, step = pad("r", i), pad("s", i)
            yield (run, "", "run.created", "{}")
            if kind == "mixed":
                yield (run, step, "step.started", "{}")
                yield (run, step, "approval.requested", '{"approval_id":"%s"}' % pad("a", i))
                yield (run, step, "step.tool_started", '{"tool":"%s"}' % pad("t", i))
            yield (run, step, "model.dispatched", '{"call_id":"%s"}' % pad("c", i))
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
            sys.exit(f"gen-wide.py: unknown shape {shape!r} (steps, approvals, models, runs, mixed:N or calls:N)")


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
