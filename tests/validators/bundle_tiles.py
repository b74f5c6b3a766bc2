"""An independent reading of an evidence bundle's tiles, written apart from
chainship: the bundle is read as a C2SP tlog-tiles directory through
aics-tlog's VerifiedTileReader, which proves every tile it hands out against
the checkpoint's root (a full tile against its entry in its parent, the
right edge against the root, as Go's tlog.TileHashReader does). From those
tiles it computes each record's RFC 9162 inclusion proof (2.1.3.1 PATH) the
way Go's tlog.ProveRecord does, each subtree hash from the tile that stores
it, and writes OUT/<seq>.proof (base64 hashes, one a line) and OUT/<seq>.leaf
(the record's hash), for aics-tlog verify-inclusion to check against the
signed checkpoint. With gaps.txt it also checks that every position from the
run's first record to the checkpoint's size is a record or in gaps.txt,
exactly once, each record the entry at its position and its prev_hash the
entry before it.
Prints {"ok": bool, "positions": count, "proofs": [seq, ...], "why": text}.
Usage: python3 bundle_tiles.py BUNDLE_DIR OUT_DIR
"""

import base64
import hashlib
import json
import sys
from pathlib import Path

from aics_tlog.tiles import FileSystemTileReader
from aics_tlog.verified import VerifiedTileReader


def leaf(entry):
    return hashlib.sha256(b"\x00" + entry.encode()).digest()


def node(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def fold(hashes):
    """MTH of a power-of-two run of hashes."""
    while len(hashes) > 1:
        hashes = [node(hashes[i], hashes[i + 1]) for i in range(0, len(hashes), 2)]
    return hashes[0]


class Tree:
    def __init__(self, tiles, size):
        self.tiles, self.size = tiles, size

    def stored(self, lo, hi):
        """MTH of the aligned perfect subtree [lo, hi), from the tile that stores it."""
        height = (hi - lo).bit_length() - 1
        level, within = divmod(height, 8)
        first = lo >> (8 * level)
        tile, offset = divmod(first, 256)
        width = min(256, (self.size >> (8 * level)) - tile * 256)
        data = self.tiles.read_tile(level, tile, None if width == 256 else width)
        if data is None:
            raise LookupError(f"no tile {level}/{tile} of width {width}")
        return fold([data[i * 32 : (i + 1) * 32] for i in range(offset, offset + (1 << within))])

    def mth(self, lo, hi):
        n = hi - lo
        if n & (n - 1) == 0 and lo % n == 0:
            return self.stored(lo, hi)
        k = 1 << ((n - 1).bit_length() - 1)
        return node(self.mth(lo, lo + k), self.mth(lo + k, hi))

    def path(self, m, lo, hi):
        n = hi - lo
        if n == 1:
            return []
        k = 1 << ((n - 1).bit_length() - 1)
        if m < k:
            return self.path(m, lo, lo + k) + [self.mth(lo + k, hi)]
        return self.path(m - k, lo + k, hi) + [self.mth(lo, lo + k)]


def main(bundle, out):
    b, out = Path(bundle), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    records = {}
    for name in ("records.jsonl", "newest.json"):
        for line in (b / name).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                records.setdefault(r["seq"], r)
    note = (b / "checkpoint").read_text().split("\n")
    size, root = int(note[1]), base64.b64decode(note[2])
    report = {"ok": False, "positions": 0, "proofs": [], "why": ""}
    tiles = VerifiedTileReader(FileSystemTileReader(b), size, root)
    tree = Tree(tiles, size)
    try:
        tiles.check_root()
        for seq, r in sorted(records.items()):
            proof = tree.path(seq - 1, 0, size)
            (out / f"{seq}.proof").write_text("".join(base64.b64encode(h).decode() + "\n" for h in proof))
            (out / f"{seq}.leaf").write_text(r["hash"])
            report["proofs"].append(seq)
        if (b / "gaps.txt").exists():
            run = {s: r for s, r in records.items() if s != size or r["run_id"] == records[min(records)]["run_id"]}
            others = set()
            for line in (b / "gaps.txt").read_text().splitlines():
                lo, _, hi = line.partition("-")
                others.update(range(int(lo), int(hi or lo) + 1))
            first = min(run)
            report["positions"] = size - first + 1
            if others & set(run):
                report["why"] = "a seq is both a record and in gaps.txt"
                return report
            if set(run) | others != set(range(first, size + 1)):
                report["why"] = "not every position from the first record to the size"
                return report
            for seq in range(first, size + 1):
                entry = tiles.leaf_hash(seq - 1)
                r = run.get(seq)
                if r is not None and entry != leaf(r["hash"]):
                    report["why"] = f"seq {seq}: the record is not the entry there"
                    return report
                if r is not None and seq > first and tiles.leaf_hash(seq - 2) != leaf(r["prev_hash"]):
                    report["why"] = f"seq {seq}: its prev_hash is not the entry before"
                    return report
    except Exception as e:  # a tile missing, or not the tree's
        report["why"] = f"{type(e).__name__}: {e}"
        return report
    report["ok"] = True
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
