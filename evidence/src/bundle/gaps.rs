//! `--with-gaps`: every position from the run's creation to the checkpoint
//! accounted for — each a record of the run or another run's event
//! (`gaps.txt`) — and shown in the checkpoint's tree; and `--reveal`, a
//! record shown for a seq the bundle gives only as an entry of the tree.
//!
//! Two forms: `gaps.txt` as seqs and ranges of seqs (`12`, `14-16`), their
//! entries in the bundle's tiles, which cover every position of the span
//! (what `evidence` writes); or, in bundles written before the tiles, as
//! `<seq> <hash>` lines with one range proof (`gaps.proof`).

use std::collections::BTreeMap;

use chainship_chain::record::Record;
use chainship_chain::{Error, permanent};
use chainship_runs::{Profile, Role};
use chainship_tlog::range::verify_range;
use chainship_verify::Kind;
use chainship_verify::proof::NotProven;

use chainship_tlog::tiles::{TileSet, WIDTH, tile_path, tile_width};

use super::check::{CheckpointStatus, not_proven, text};
use super::{BundleFiles, GAPS, GAPS_PROOF, RANGE_PROOF_HEADER};

/// `--with-gaps`: every position from the run's first event (its
/// `run.created`) to the checkpoint's size.
#[derive(Debug)]
pub struct GapsStatus {
    pub first: u64,
    /// The checkpoint's size: the positions after the run's last event are accounted for too.
    pub last: u64,
    /// Other runs' events accounted for (by their entry in the tree).
    pub hashes: u64,
    pub problems: Vec<NotProven>,
}

/// What a revealed record showed.
#[derive(Debug)]
pub struct RevealStatus {
    pub seq: u64,
    pub run_id: String,
    pub problem: Option<NotProven>,
}

/// The hash at each seq the bundle gives only as a hash, from `gaps.txt`.
fn read_gaps(text: &str) -> Result<BTreeMap<u64, String>, Error> {
    let mut gaps = BTreeMap::new();
    // One spelling: lines of "<seq> <hash>\n", the seq in plain decimal.
    if !text.is_empty() && !text.ends_with('\n') || text.contains('\r') {
        return Err(permanent!(
            "{GAPS}: not lines of \"<seq> <hash>\" each ending in a newline"
        ));
    }
    for (i, line) in text.lines().enumerate() {
        let bad = || permanent!("{GAPS} line {}: not \"<seq> <hash>\"", i + 1);
        let (seq_text, hash) = line.split_once(' ').ok_or_else(bad)?;
        let seq: u64 = seq_text.parse().map_err(|_| bad())?;
        if seq.to_string() != seq_text {
            return Err(bad());
        }
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(bad());
        }
        if gaps.insert(seq, hash.to_owned()).is_some() {
            return Err(permanent!("{GAPS} line {}: seq {seq} a second time", i + 1));
        }
    }
    Ok(gaps)
}

/// Parses `gaps.proof`: its start and end index and hashes.
fn read_range_proof(text: &str) -> Result<(u64, u64, Vec<chainship_tlog::Hash>), Error> {
    let mut lines = text.lines();
    let bad = |what: &str| permanent!("{GAPS_PROOF}: {what}");
    if lines.next() != Some(RANGE_PROOF_HEADER) {
        return Err(bad(&format!("the first line is not {RANGE_PROOF_HEADER}")));
    }
    let mut number = |name: &str| -> Result<u64, Error> {
        lines
            .next()
            .and_then(|l| l.strip_prefix(name))
            .and_then(|v| v.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| bad(&format!("no {name} line")))
    };
    let (start, end) = (number("start")?, number("end")?);
    let hashes = lines
        .map(|l| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(l)
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| bad(&format!("{l:?} is not a base64 SHA-256 hash")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((start, end, hashes))
}

/// Checks that every position from the run's first event (its creation) to
/// the checkpoint's size is accounted for (a record of the run, or another
/// event's hash), that the whole range of entries is in the checkpoint's
/// tree, and that each record's `prev_hash` is the entry before it.
pub(super) fn check_gaps(
    files: &BundleFiles,
    run: &[Record<'_>],
    cp: &CheckpointStatus,
    profile: &Profile,
    tiles: &TileSet,
) -> Result<GapsStatus, Error> {
    if files.get(GAPS_PROOF).is_none() {
        return check_tiled_gaps(files, run, cp, profile, tiles);
    }
    let gaps = read_gaps(text(files, GAPS)?)?;
    let (start, end, proof) = read_range_proof(text(files, GAPS_PROOF)?)?;
    let last = cp.size;
    let mut status = GapsStatus {
        first: run.first().map_or(0, |r| r.seq),
        last,
        hashes: gaps.len() as u64,
        problems: Vec::new(),
    };
    let Some(first) = span_start(run, profile, &mut status) else {
        return Ok(status);
    };
    let mut at: BTreeMap<u64, &str> = gaps.iter().map(|(s, h)| (*s, h.as_str())).collect();
    for r in run {
        if at.insert(r.seq, &r.hash).is_some() {
            status.problems.push(not_proven(
                Some(Kind::Duplicate),
                format!("seq {} is both a record of the run and a hash in {GAPS}", r.seq),
            ));
        }
    }
    let outside: Vec<u64> = at.keys().copied().filter(|s| *s < first || *s > last).collect();
    if let Some(s) = outside.first() {
        status.problems.push(not_proven(
            None,
            format!("{GAPS} names seq {s}, outside seqs {first}..={last} (the run's first event to the checkpoint)"),
        ));
    }
    // Unaccounted positions, as ranges.
    let mut missing: Vec<(u64, u64)> = Vec::new();
    let mut expect = first;
    // Past the last position: a size near u64::MAX must not overflow.
    let past = [last.checked_add(1)].into_iter().flatten();
    for seq in at.keys().copied().filter(|s| (first..=last).contains(s)).chain(past) {
        if seq > expect {
            missing.push((expect, seq - 1));
        }
        expect = seq.saturating_add(1);
    }
    for (from, to) in &missing {
        status.problems.push(not_proven(
            Some(Kind::Gap),
            format!("seq {from}..={to}: neither a record of the run nor a hash in {GAPS}: an event left out"),
        ));
    }
    // Each record follows the entry before it.
    for r in run.iter().filter(|r| r.seq > first) {
        if let Some(prev) = at.get(&(r.seq - 1))
            && *prev != r.prev_hash
        {
            status.problems.push(not_proven(
                Some(Kind::Altered),
                format!(
                    "seq {}: its prev_hash is not the hash the bundle gives for seq {}",
                    r.seq,
                    r.seq - 1
                ),
            ));
        }
    }
    if !missing.is_empty() || !outside.is_empty() {
        return Ok(status);
    }
    if start != first - 1 || end != last {
        status.problems.push(not_proven(
            None,
            format!(
                "{GAPS_PROOF} covers entries {start}..{end}, not {}..{last} (the run's first event to the checkpoint)",
                first - 1
            ),
        ));
        return Ok(status);
    }
    let leaves: Vec<chainship_tlog::Hash> = at.values().map(|h| chainship_tlog::leaf_hash(h.as_bytes())).collect();
    let root = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(&cp.root_b64)
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .unwrap_or_default()
    };
    if !verify_range(start, cp.size, &leaves, &proof, &root) {
        status.problems.push(not_proven(
            None,
            format!(
                "{GAPS_PROOF}: the entries of seqs {first}..={last} do not lead to the root of checkpoint {}",
                cp.size
            ),
        ));
    }
    Ok(status)
}

/// Where the span starts, in both forms: the run's first record, which must
/// be its creation (and the span runs on to the checkpoint), so no event can
/// be cut off at either end. `None` (named in `status`) without a record.
fn span_start(run: &[Record<'_>], profile: &Profile, status: &mut GapsStatus) -> Option<u64> {
    let Some(head) = run.first() else {
        status
            .problems
            .push(not_proven(None, "no record of the run to account for"));
        return None;
    };
    if profile.role(head.kind.as_bytes()) != Role::RunCreated {
        status.problems.push(not_proven(
            Some(Kind::Gap),
            format!(
                "the run's first event in the bundle, seq {}, is {:?}, not its creation: the events before it are not accounted for",
                head.seq, head.kind
            ),
        ));
    }
    Some(head.seq)
}

/// Parses `gaps.txt` of the tiles form: lines of `<seq>` or `<first>-<last>`,
/// in plain decimal, increasing and apart. Ranges apart need a record
/// between them, so more than `most` of them cannot all be accounted for:
/// `None` then (memory follows the run, not what the file claims).
fn read_ranges(text: &str, most: usize) -> Result<Option<Vec<(u64, u64)>>, Error> {
    if !text.is_empty() && !text.ends_with('\n') || text.contains('\r') {
        return Err(permanent!("{GAPS}: not lines each ending in a newline"));
    }
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = || {
            permanent!(
                "{GAPS} line {}: not \"<seq>\" or \"<first>-<last>\" (a {GAPS} of \"<seq> <hash>\" lines needs its {GAPS_PROOF})",
                i + 1
            )
        };
        let number = |t: &str| t.parse::<u64>().ok().filter(|n| n.to_string() == t && *n > 0);
        let (a, b) = match line.split_once('-') {
            Some((a, b)) => (number(a).ok_or_else(bad)?, number(b).ok_or_else(bad)?),
            None => (number(line).ok_or_else(bad)?, number(line).ok_or_else(bad)?),
        };
        if b < a || (line.contains('-') && a == b) {
            return Err(bad());
        }
        if ranges.last().is_some_and(|(_, last)| a <= last.saturating_add(1)) {
            return Err(permanent!(
                "{GAPS} line {}: seq {a} is not after the line before it (ranges are increasing and apart)",
                i + 1
            ));
        }
        if ranges.len() == most {
            return Ok(None);
        }
        ranges.push((a, b));
    }
    Ok(Some(ranges))
}

/// Entry `index`'s leaf hash, from the bundle's (proven) tiles.
fn leaf_at(tiles: &TileSet, index: u64) -> Option<chainship_tlog::Hash> {
    let hashes = tiles.hashes(0, index / WIDTH as u64)?;
    hashes.get((index % WIDTH as u64) as usize).copied()
}

/// The tiles form of [`check_gaps`]: the positions from the run's creation
/// to the checkpoint are the run's records and `gaps.txt`'s ranges, each
/// once; every level-0 tile of the span is in the bundle (proven with the
/// rest of its tiles by the caller), and each record's `prev_hash` is the
/// entry before it.
fn check_tiled_gaps(
    files: &BundleFiles,
    run: &[Record<'_>],
    cp: &CheckpointStatus,
    profile: &Profile,
    tiles: &TileSet,
) -> Result<GapsStatus, Error> {
    let last = cp.size;
    let Some(ranges) = read_ranges(text(files, GAPS)?, run.len() + 1)? else {
        return Ok(GapsStatus {
            first: run.first().map_or(0, |r| r.seq),
            last,
            hashes: 0,
            problems: vec![not_proven(
                Some(Kind::Gap),
                format!(
                    "{GAPS} holds more ranges than the run's {} record(s) can separate: some position between them is accounted for by neither",
                    run.len()
                ),
            )],
        });
    };
    let mut status = GapsStatus {
        first: run.first().map_or(0, |r| r.seq),
        last,
        hashes: ranges.iter().map(|(a, b)| b - a + 1).sum(),
        problems: Vec::new(),
    };
    let Some(first) = span_start(run, profile, &mut status) else {
        return Ok(status);
    };
    if first > last {
        status.problems.push(not_proven(
            None,
            format!("the run's first record, seq {first}, is past the checkpoint (size {last})"),
        ));
        return Ok(status);
    }
    // The records and the ranges, merged in seq order (both are sorted).
    let mut spans: Vec<(u64, u64, bool)> = run.iter().map(|r| (r.seq, r.seq, true)).collect();
    spans.extend(ranges.iter().map(|(a, b)| (*a, *b, false)));
    spans.sort_unstable();
    if let Some((a, _, _)) = spans.iter().find(|(a, b, _)| *a < first || *b > last) {
        status.problems.push(not_proven(
            None,
            format!("{GAPS} names seq {a}, outside seqs {first}..={last} (the run's first event to the checkpoint)"),
        ));
        return Ok(status);
    }
    // The next seq to account for; u128, so a span ending at u64::MAX ends.
    let mut expect = u128::from(first);
    for (a, b, _) in &spans {
        if u128::from(*a) < expect {
            status.problems.push(not_proven(
                Some(Kind::Duplicate),
                format!("seq {a} is both a record of the run and in {GAPS}"),
            ));
        } else if u128::from(*a) > expect {
            status.problems.push(not_proven(
                Some(Kind::Gap),
                format!(
                    "seq {expect}..={}: neither a record of the run nor in {GAPS}: an event left out",
                    a - 1
                ),
            ));
        }
        expect = expect.max(u128::from(*b) + 1);
    }
    if expect <= u128::from(last) {
        status.problems.push(not_proven(
            Some(Kind::Gap),
            format!("seq {expect}..={last}: neither a record of the run nor in {GAPS}: an event left out"),
        ));
    }
    // Every position of the span in the tree: its level-0 tile is here.
    // Counted, not walked: a forged size must not make this loop for ever.
    let (low, high) = ((first - 1) / WIDTH as u64, (last - 1) / WIDTH as u64);
    let held = tiles
        .held()
        .iter()
        .filter(|(level, index)| *level == 0 && (low..=high).contains(index))
        .count() as u64;
    let wanted = high - low + 1;
    if held < wanted {
        // The first missing one is at most `held` tiles past the span's start.
        let index = (low..=high).find(|i| tiles.hashes(0, *i).is_none()).unwrap_or(low);
        let path = tile_path(0, index, tile_width(last, 0, index));
        status.problems.push(not_proven(
            Some(Kind::Gap),
            format!(
                "the bundle lacks {path}, one of {} level-0 tile(s) of the span it lacks (or its tiles are not the tree's): seqs {}..={} are not shown in the tree",
                wanted - held,
                index.saturating_mul(WIDTH as u64).saturating_add(1).max(first),
                index.saturating_add(1).saturating_mul(WIDTH as u64).min(last)
            ),
        ));
    }
    // Each record follows the entry before it.
    for r in run.iter().filter(|r| r.seq > first) {
        let before = leaf_at(tiles, r.seq - 2);
        if before.is_some_and(|h| h != chainship_tlog::leaf_hash(r.prev_hash.as_bytes())) {
            status.problems.push(not_proven(
                Some(Kind::Altered),
                format!(
                    "seq {}: its prev_hash is not the entry the bundle's tiles give for seq {}",
                    r.seq,
                    r.seq - 1
                ),
            ));
        }
    }
    Ok(status)
}

/// A record revealed for a seq given only as a hash: when it is the entry
/// there and of this run, the run's event was withheld. `bound`: its fields
/// are bound to its hash (it hashes to it, or a trusted statement binds a
/// tombstone's). A record that is not the entry there reveals nothing
/// (`Err`, a usage error).
pub(super) fn check_reveal(
    revealed: &Record<'_>,
    bound: bool,
    files: &BundleFiles,
    run_id: &[u8],
    run: &[Record<'_>],
    has_gaps: bool,
    tiles: &TileSet,
) -> Result<RevealStatus, Error> {
    let seq = revealed.seq;
    // Compared as stored bytes, as the records are.
    let of_run_bytes = revealed.field_bytes("run_id").unwrap_or_default().into_owned();
    let of_run = String::from_utf8_lossy(&of_run_bytes).into_owned();
    if !has_gaps || files.get(GAPS).is_none() {
        return Err(permanent!(
            "{}: the bundle has no {GAPS}: there is no hash to reveal a record for (write it with --with-gaps)",
            files.place
        ));
    }
    if run.iter().any(|r| r.seq == seq) {
        return Err(permanent!(
            "seq {seq} is a record of the bundle, not a hash: nothing to reveal"
        ));
    }
    let entry_is_it = match files.get(GAPS_PROOF) {
        Some(_) => {
            let gaps = read_gaps(text(files, GAPS)?)?;
            let Some(hash) = gaps.get(&seq) else {
                return Err(permanent!("the bundle gives no hash for seq {seq}"));
            };
            revealed.hash == hash.as_str()
        }
        None => {
            let ranges = read_ranges(text(files, GAPS)?, run.len() + 1)?.unwrap_or_default();
            let leaf = leaf_at(tiles, seq.wrapping_sub(1));
            if !ranges.iter().any(|(a, b)| (*a..=*b).contains(&seq)) || leaf.is_none() {
                return Err(permanent!("the bundle gives no entry for seq {seq}"));
            }
            leaf == Some(chainship_tlog::leaf_hash(revealed.hash.as_bytes()))
        }
    };
    if !bound || !entry_is_it {
        return Err(permanent!(
            "--record is not the event at seq {seq}: it does not hash to the bundle's entry there"
        ));
    }
    let problem = (of_run_bytes == run_id).then(|| {
        not_proven(
            Some(Kind::Gap),
            format!("seq {seq} is an event of run {of_run:?} that the bundle gives only as a hash: it was withheld"),
        )
    });
    Ok(RevealStatus {
        seq,
        run_id: of_run,
        problem,
    })
}
