#!/usr/bin/env python3
"""A chained audit database that is not agentrt-shaped: run ids that mostly
never finish, random agentrt and unknown types, random steps, approvals and
calls, times that jump back. For benchmarks of the run check's memory on
foreign or hostile data (scripts/bench-restart). Usage: gen-hostile.py DB N [SEED]"""
import hashlib, random, sqlite3, sys

TYPES = ["run.created", "run.started", "run.finished", "lease.taken_over", "step.started",
         "step.decided", "step.policy", "step.tool_started", "step.tool_finished", "step.failed",
         "step.interrupted", "approval.requested", "approval.decided", "model.dispatched",
         "model.completed", "custom.one", "custom.two", "custom.three"]


def netstring(b):
    return str(len(b)).encode() + b":" + b + b","


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    db = sqlite3.connect(path)
    db.execute("""CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,
        step_id TEXT NOT NULL DEFAULT '', at TEXT NOT NULL, type TEXT NOT NULL,
        payload_json TEXT NOT NULL, hash TEXT NOT NULL DEFAULT '')""")
    prev, runs, rows = b"", 0, []
    for seq in range(1, n + 1):
        if runs == 0 or rng.random() < 0.4:
            runs += 1
            run = runs
        else:
            run = max(1, runs - rng.randrange(100_000))
        step = f"s{rng.randrange(40)}"
        kind = rng.choice(TYPES)
        secs = seq // 50 - (rng.randrange(120) if rng.random() < 0.05 else 0)
        at = f"2026-{1 + secs // 2_000_000 % 12:02d}-{1 + secs // 80_000 % 25:02d}T{secs // 3600 % 24:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}Z"
        payload = ('{"tool":"t%d","approval_id":"a%d","call_id":"c%d","args":{"x":%d},"outcome":"%s","status":"%s"}'
                   % (rng.randrange(50), rng.randrange(1000), rng.randrange(1000), rng.randrange(10**6),
                      rng.choice(["allow", "deny", "require_approval"]), rng.choice(["approved", "rejected"])))
        fields = [prev, str(seq).encode(), f"r{run}".encode(), step.encode(), at.encode(), kind.encode(),
                  payload.encode()]
        prev = hashlib.sha256(b"".join(netstring(f) for f in fields)).hexdigest().encode()
        rows.append((seq, f"r{run}", step, at, kind, payload, prev.decode()))
        if len(rows) == 50_000:
            db.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?)", rows)
            rows = []
    db.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?)", rows)
    db.commit()


main()
