//! `README.txt`: what the bundle proves and what it does not, and how to
//! check it with chainship and without it.

use super::check::EvidenceReport;
use super::{CHECKPOINT, GAPS, GAPS_PROOF, HEAD, NEWEST, PROOFS_DIR, RANGE_PROOF_HEADER, RECORDS, TILES_DIR};

pub fn render(r: &EvidenceReport) -> String {
    let cp = &r.checkpoint;
    let legacy = r.per_record_proofs;
    let gaps = match &r.gaps {
        Some(g) if !legacy => format!(
            "\
This bundle was written with --with-gaps: {GAPS} gives the seq of each of the {}
other events from the run's creation (its first event, seq {}) to the checkpoint's
size (seq {}), and the tiles hold every entry of that range, proven in the tree of
the checkpoint. Every position in it is accounted for, so no event of the run can be
cut off at either end or in between: it can be left out only by passing it off as
another run's event, and revealing that one event refutes it:
    chainship check-evidence BUNDLE --trusted-key KEY --with-gaps --reveal SEQ --record RECORD.json
(--with-gaps makes check-evidence insist on these files, so they cannot be removed.)
The other runs' events appear in this bundle only as entries of the tree.
",
            g.hashes, g.first, g.last
        ),
        Some(g) => format!(
            "\
This bundle was written with --with-gaps: {GAPS} gives the stored hash of each of the
{} other events from the run's creation (its first event, seq {}) to the checkpoint's
size (seq {}), and {GAPS_PROOF} proves, in one proof, that this whole range of entries
is in the tree of the checkpoint. Every position in it is accounted for, so no event
of the run can be cut off at either end or in between: it can be left out only by
passing it off as another run's event, and revealing that one event refutes it:
    chainship check-evidence BUNDLE --trusted-key KEY --with-gaps --reveal SEQ --record RECORD.json
(--with-gaps makes check-evidence insist on these files, so they cannot be removed.)
The other runs' events appear in this bundle only as hashes.
",
            g.hashes, g.first, g.last
        ),
        None => "\
This bundle was written without --with-gaps: it cannot show that no event of the run
was left out (write it with --with-gaps for that; see below).
"
        .to_owned(),
    };
    format!(
        "\
Evidence for run {run} of {origin}
=====================================================================

Files
  {RECORDS}      the run's events, exactly as exported, one record a line, in seq order
{proof_files}  {CHECKPOINT}         the checkpoint (C2SP tlog-checkpoint, a signed note), size {size},
                     signed by {signers}{witnesses}
  {HEAD}               the signed head at seq {size} (chainship-head/v1, a signed note)
  {NEWEST}        the log's newest event at the checkpoint (seq {size}), {newest_proof}: its time is the clock the run check judges silence by
  run.json           the run's timeline and the run check's verdict (chainship-run/v1)
  report.html        the same, as a page to read or print
                     (both are renderings, not signed: check-evidence derives the verdict
                     again and fails when they are not what the records render)
{gaps_files}
What it proves
  Each included event is in the log at its seq, under a checkpoint the trusted keys
  signed{cosigned}. The run's transitions among the included events are legal (or the
  findings name where they are not) and its outcome is what they say.

What it cannot prove
  That no other event of the run exists: the events of all runs share one chain, so
  the run's events are not a contiguous range of it.
{gaps}
Check it with chainship
    chainship check-evidence BUNDLE --trusted-key KEY --origin {origin} --run {run}{with_gaps}
        [--witness-key W --witness-quorum N]
  Exit 0: every record proven, the run without finding, and run.json, report.html and
  this file what the records render; 1: otherwise, each named; 2: not a bundle, or a
  usage error.

Check it without chainship
  1. Each line of {RECORDS} is one event. Its hash is the hex SHA-256 of seven
     netstrings (<byte length>:<bytes>,): prev_hash, seq in decimal, run_id, step_id,
     at, type and payload_json (spec: docs/chain-format.md), each field as stored: a
     field named in the record's \"b64\" list is base64 of the stored bytes, decoded
     first. It must equal the record's hash.
  2. The tree's entry for seq S is at index S-1, and is that hash as 64 lower-case hex
     characters. Its leaf hash is SHA-256(0x00 || entry) (RFC 6962).
{step3}  4. The log's key is given as NAME+KEYID+BASE64: BASE64 decodes to the byte 0x01 then
     the 32-byte Ed25519 public key. The checkpoint is a signed note (https://c2sp.org/signed-note): each signature line
     is '— NAME BASE64', whose bytes are a 4-byte key id (the first 4 bytes of
     SHA-256(NAME || 0x0A || 0x01 || the 32-byte public key)) then an Ed25519
     signature of the note's text (every line before the blank line, with its final
     newline). Check it with the log's public key; witness cosignatures (https://c2sp.org/tlog-cosignature)
     sign '{cosig}' then the time and the checkpoint text. Check {HEAD} the same way:
     it must name the checkpoint's origin and size, and the hash of {NEWEST}, itself
     proven at that size like any record.
  5. Every record must be of the run named above and of the checkpoint's origin, in
     seq order; apply the run's rules to them again rather than trusting run.json.
{gaps_manual}",
        run = super::printable(&r.run_id),
        origin = super::printable(&cp.origin),
        size = cp.size,
        signers = if cp.signers.is_empty() {
            "(no trusted key)".to_owned()
        } else {
            cp.signers.join(", ")
        },
        witnesses = if cp.witnesses.is_empty() {
            String::new()
        } else {
            format!(",\n                     cosigned by {}", cp.witnesses.join(", "))
        },
        cosigned = if cp.witnesses.is_empty() {
            ""
        } else {
            " and the witnesses cosigned"
        },
        proof_files = if legacy {
            format!(
                "  {PROOFS_DIR}/SEQ.proof   for each, a C2SP tlog-proof (https://c2sp.org/tlog-proof) against\n                     the checkpoint below\n"
            )
        } else {
            format!(
                "  {TILES_DIR}/L/N[.p/W]     the hash tiles (C2SP tlog-tiles, https://c2sp.org/tlog-tiles) each\n                     record's inclusion proof is computed from, and those that prove them:\n                     with {CHECKPOINT} beside them, this directory is a tiles directory\n                     any C2SP client reads\n"
            )
        },
        newest_proof = if legacy {
            "with its own\n                     proof"
        } else {
            "proven like\n                     any record"
        },
        step3 = if legacy {
            format!(
                "  3. {PROOFS_DIR}/S.proof is a C2SP tlog-proof: the line c2sp.org/tlog-proof@v1, the
     line 'index S-1', the inclusion proof hashes in base64 (one a line), a blank
     line, then the checkpoint. Check inclusion as RFC 9162 2.1.3.2 says, against the root
     hash on the checkpoint's third line, for the tree size on its second line.
"
            )
        } else {
            format!(
                "  3. {TILES_DIR}/ holds C2SP tlog-tiles: {TILES_DIR}/L/N is 256 hashes of level L (N written
     in groups of three digits, x001/234 for 1234), {TILES_DIR}/L/N.p/W the W hashes of a
     partial tile at the tree's right edge. Prove each tile before using it: a full tile's
     hashes (their RFC 6962 MTH) must be its entry in the tile above it, and the partial
     tiles must give the root on the checkpoint's third line for the size on its second.
     Entry S-1's inclusion proof is then RFC 9162 2.1.3.1's, each subtree hash read
     from the tile that stores it (a subtree of 2^(8L+k) entries: 2^k hashes of level L,
     folded), as Go's golang.org/x/mod/sumdb/tlog does; check it as RFC 9162 2.1.3.2
     says. The bundle holds exactly those tiles (a client that rebuilds subtrees from
     lower tiles needs more). For the checkpoint and the right edge, a C2SP client can
     read this directory as tiles, for example aics-tlog (PyPI):
         aics-tlog verify-checkpoint --tiles BUNDLE --log-key KEY
"
            )
        },
        gaps_files = if r.gaps.is_some() && !legacy {
            format!(
                "  {GAPS}           'A' or 'A-B' a line: the seqs of every other event from the run's\n                     creation to the checkpoint (their entries are in the tiles)\n"
            )
        } else if r.gaps.is_some() {
            format!(
                "  {GAPS}           '<seq> <hash>' for every other event from the run's creation to the checkpoint\n  {GAPS_PROOF}         the range proof of those entries ({RANGE_PROOF_HEADER})\n"
            )
        } else {
            String::new()
        },
        cosig = "cosignature/v1",
        with_gaps = if r.gaps.is_some() { " --with-gaps" } else { "" },
        gaps_manual = if r.gaps.is_some() && !legacy {
            format!(
                "  6. {GAPS} gives the seqs ('A', or 'A-B' for a range) of the other events from the
     run's first seq to the checkpoint's size: with the records they must be every seq
     of that range, each once. Every level-0 tile of the range must be in the bundle and
     proven (as in 3); each record's leaf hash must be the entry at its position, its
     prev_hash's leaf hash the entry before it. The run's first record must be its
     run.created.
"
            )
        } else if r.gaps.is_some() {
            format!(
                "  6. {GAPS_PROOF} gives 'start A' and 'end B' (entries A..B-1: the run's first seq - 1
     to the checkpoint's size - 1), then base64 hashes: the subtree hashes of the rest of the
     tree, in the order RFC 6962's MTH recursion meets them. Rebuild MTH of the whole
     tree by that recursion: a subtree outside A..B takes the next proof hash, a single
     entry inside takes the leaf hash of the entry (from {RECORDS} or {GAPS}); the
     result must be the checkpoint's root, with every proof hash used. The run's first
     record must be its run.created.
"
            )
        } else {
            String::new()
        },
    )
}
