"""An independent check of an evidence bundle's range proof (--with-gaps),
written from RFC 6962 section 2.1 alone, standard library only.

Every entry from the run's first seq to its last is one leaf: the run's
records (their `hash`) and the other events (gaps.txt). The tree's root is
MTH(D[0:n]) with MTH of one entry SHA-256(0x00 || entry) and of more
SHA-256(0x01 || MTH(left) || MTH(right)), split at the largest power of two
below n. gaps.proof gives, left to right, the MTH of each subtree the range
does not touch. Prints {"ok": bool, "leaves": count, "why": text}.
Usage: python3 range_proof.py BUNDLE_DIR
"""

import base64
import hashlib
import json
import sys
from pathlib import Path


def largest_power_of_two_below(n):
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def main(bundle):
    b = Path(bundle)
    entries = {}
    for line in (b / "records.jsonl").read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            entries[record["seq"]] = record["hash"]
    for line in (b / "gaps.txt").read_text().splitlines():
        seq, digest = line.split(" ")
        entries[int(seq)] = digest
    lines = (b / "gaps.proof").read_text().splitlines()
    assert lines[0] == "chainship-range-proof/v1", lines[0]
    start = int(lines[1].removeprefix("start "))
    end = int(lines[2].removeprefix("end "))
    proof = [base64.b64decode(x) for x in lines[3:]]
    note = (b / "checkpoint").read_text().split("\n")
    size, root = int(note[1]), base64.b64decode(note[2])
    seqs = sorted(entries)
    if seqs != list(range(start + 1, end + 1)):
        return {"ok": False, "leaves": len(seqs), "why": "the entries are not every seq of the range"}
    leaves = [hashlib.sha256(b"\x00" + entries[s].encode()).digest() for s in seqs]
    used = iter(proof)

    def mth(lo, hi):
        if hi <= start or lo >= end:
            return next(used)
        if hi - lo == 1:
            return leaves[lo - start]
        k = largest_power_of_two_below(hi - lo)
        left = mth(lo, lo + k)
        return hashlib.sha256(b"\x01" + left + mth(lo + k, hi)).digest()

    try:
        computed = mth(0, size)
    except StopIteration:
        return {"ok": False, "leaves": len(leaves), "why": "too few proof hashes"}
    if next(used, None) is not None:
        return {"ok": False, "leaves": len(leaves), "why": "proof hashes left over"}
    ok = computed == root
    return {"ok": ok, "leaves": len(leaves), "why": "" if ok else "the root differs"}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
