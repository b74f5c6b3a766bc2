//! `chainship diff`: what the database says against what the trusted copy
//! says, event by event: fields changed, events deleted or cut, events the
//! copy never had, and where the two chains fork.
//!
//! The copy is read once, in its order; the database is read alongside it
//! in pages, by seq. Memory holds one page and the first `--limit` changed
//! events in detail; everything past that is counted.

use chainship_chain::record::Record;
use chainship_chain::{ChainBreak, ChainCheck, EventBatch, EventDb, EventRef};
use clap::Args;
use serde_json::{Value, json};

use crate::affected::{self, Affected, RecordEvent};
use crate::args::{DbArgs, OutputArgs, RunRulesArgs};
use crate::exit::{CliError, CmdResult, verdict};
use crate::progress::records_spinner;
use crate::report;
use crate::trusted_copy::{self, CopyExpectations, CopyOutcome, TrustedCopyArgs};

/// Show what changed in the database against the trusted copy.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship diff --db /data/audit.db --from file:/siem/events.jsonl --anchor file:/mnt/anchors \\
      --trusted-key keys.txt --origin prod-eu1/agentrt
  chainship diff --db audit.db --from s3://siem-bucket/exports --origin prod-eu1/agentrt \\
      --anchor s3://audit-anchors/heads --trusted-key keys.txt --json

Reports: changed (which fields, the copy's and the database's values, long values
shortened with their lengths), missing from the database (deleted, or cut at the end),
in the database only (seqs the copy lacks inside its range), the fork point (the first
seq whose stored hash differs), and the events beyond the copy's end (not yet exported,
or added after a rollback; shown, not a difference). The copy is checked as
verify-export checks it; its own findings are shown too.
Exit codes: 0 the same, 1 different (or the copy is damaged or untrusted), 2 usage or setup error.")]
#[command(mut_arg("db", |a| a.required(true)))]
#[command(mut_arg("anchor", |a| a.required(true)))]
#[command(mut_arg("origin", |a| a.help(
    "Whose copy (needed for s3:// and kafka://; a file's first record names it otherwise)"
)))]
pub struct DiffArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub copy: TrustedCopyArgs,
    /// Show at most this many changed events in detail (the rest are counted).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub limit: usize,
    #[command(flatten)]
    pub rules: RunRulesArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Values longer than this are shortened for display.
const SHOWN_CHARS: usize = 96;

/// One field that differs.
struct FieldDiff {
    field: &'static str,
    copy: Vec<u8>,
    database: Vec<u8>,
}

/// An event both hold, with different contents.
struct Changed {
    seq: u64,
    run_id: String,
    fields: Vec<FieldDiff>,
}

/// Seq ranges, merged as they come in order; at most `cap` kept, all counted.
struct Ranges {
    list: Vec<(u64, u64)>,
    count: u64,
    cap: usize,
    more: bool,
}

impl Ranges {
    fn new(cap: usize) -> Self {
        Ranges {
            list: Vec::new(),
            count: 0,
            cap,
            more: false,
        }
    }

    fn add(&mut self, seq: u64) {
        self.count += 1;
        if let Some((_, end)) = self.list.last_mut()
            && *end + 1 == seq
        {
            *end = seq;
        } else if self.list.len() < self.cap {
            self.list.push((seq, seq));
        } else {
            self.more = true;
        }
    }
}

/// The database, read by seq in pages, up to the head it had at the start.
/// Every row it passes is also checked against the chain, so damage the
/// copy cannot show (past its end) is still named.
struct DbCursor {
    db: EventDb,
    page: EventBatch,
    pos: usize,
    after: u64,
    head: u64,
    chain: ChainCheck,
    /// The first chain break among the rows passed.
    broken: Option<Box<ChainBreak>>,
    /// A row that could not be read (a field not text): reading stopped there.
    unreadable: Option<String>,
}

impl DbCursor {
    fn peek_seq(&mut self) -> Option<u64> {
        if self.pos >= self.page.len() && self.after < self.head && self.unreadable.is_none() {
            self.page.clear();
            self.pos = 0;
            if let Err(e) = self.db.read_page(self.after, 4096, 8 << 20, &mut self.page) {
                // Rows read before the bad one are still compared.
                self.unreadable = Some(e.to_string().replace('\n', ";"));
            }
            self.after = self.page.last().map_or(self.head, |e| e.seq);
        }
        self.current().map(|e| e.seq).filter(|&s| s <= self.head)
    }

    fn current(&self) -> Option<EventRef<'_>> {
        self.page.get(self.pos)
    }

    fn advance(&mut self) {
        if self.broken.is_none()
            && let Some(e) = self.page.get(self.pos)
            && let Err(b) = self.chain.check(&e)
        {
            self.broken = Some(b);
        }
        self.pos += 1;
    }
}

/// The side-by-side walk.
struct Comparison {
    db: DbCursor,
    last_copy: u64,
    same: u64,
    changed: Vec<Changed>,
    changed_count: u64,
    limit: usize,
    missing: Ranges,
    database_only: Ranges,
    beyond: Ranges,
    fork: Option<(u64, String, String)>,
    /// Runs and side effects of the differing events (the copy's version
    /// where it has one: what really happened).
    touched: Option<chainship_runs::Touched>,
    /// A row no seq order reaches (seq NULL, 0 or negative), described.
    unreachable: Option<String>,
    /// Copy records not compared because the database could not be read.
    not_compared: u64,
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Comparison {
    /// Takes the copy's next record: database rows before it are the
    /// database's alone; the row at its seq is compared; none is missing.
    fn feed(&mut self, r: &Record<'_>) {
        if r.seq <= self.last_copy {
            return; // a duplicate or a late record: the copy check names it
        }
        self.last_copy = r.seq;
        loop {
            match self.db.peek_seq() {
                Some(s) if s < r.seq => {
                    self.database_only.add(s);
                    if let (Some(t), Some(e)) = (self.touched.as_mut(), self.db.current()) {
                        t.feed(&chainship_runs::RunEvent::from(&e));
                    }
                    self.db.advance();
                }
                Some(s) if s == r.seq => {
                    self.compare(r);
                    self.db.advance();
                    return;
                }
                _ if self.db.unreadable.is_some() => {
                    self.not_compared += 1;
                    return;
                }
                _ => {
                    self.missing.add(r.seq);
                    self.touch(r);
                    return;
                }
            }
        }
    }

    fn touch(&mut self, r: &Record<'_>) {
        if let (Some(t), Some(e)) = (self.touched.as_mut(), RecordEvent::of(r)) {
            t.feed(&e.event(r.seq));
        }
    }

    fn compare(&mut self, r: &Record<'_>) {
        let Some(e) = self.db.current() else { return };
        let db_fields: [(&'static str, &[u8]); 6] = [
            ("run_id", e.run_id),
            ("step_id", e.step_id),
            ("at", e.at),
            ("type", e.kind),
            ("payload_json", e.payload_json),
            ("hash", e.hash),
        ];
        let mut fields = Vec::new();
        for (name, stored) in db_fields {
            let copy = if name == "hash" {
                Some(std::borrow::Cow::Borrowed(r.hash.as_bytes()))
            } else {
                r.field_bytes(name)
            };
            let copy = copy.as_deref().unwrap_or(b"");
            if copy != stored {
                fields.push(FieldDiff {
                    field: name,
                    copy: copy.to_vec(),
                    database: stored.to_vec(),
                });
            }
        }
        if fields.is_empty() {
            self.same += 1;
            return;
        }
        let (seq, hash_differs, db_hash) = (e.seq, e.hash != r.hash.as_bytes(), lossy(e.hash));
        if self.fork.is_none() && hash_differs {
            self.fork = Some((seq, r.hash.to_string(), db_hash));
        }
        self.touch(r);
        self.changed_count += 1;
        if self.changed.len() < self.limit {
            self.changed.push(Changed {
                seq,
                run_id: readable(&r.field_bytes("run_id").unwrap_or_default()),
                fields,
            });
        }
    }

    /// The database's rows after the copy's last record.
    fn finish(&mut self) {
        while let Some(s) = self.db.peek_seq() {
            self.beyond.add(s);
            self.db.advance();
        }
    }

    fn differs(&self) -> bool {
        self.changed_count > 0
            || self.missing.count > 0
            || self.database_only.count > 0
            || self.unreachable.is_some()
            || self.db.broken.is_some()
            || self.db.unreadable.is_some()
    }
}

pub fn run(args: &DiffArgs) -> CmdResult {
    let options = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
    let db = EventDb::open(args.db.path()?, &options)?;
    let head = db.head()?.map_or(0, |(seq, _)| seq);
    let unreachable = db.first_unreachable_seq()?;
    let mut cmp = Comparison {
        db: DbCursor {
            db,
            page: EventBatch::new(),
            pos: 0,
            after: 0,
            head,
            chain: ChainCheck::from_start(),
            broken: None,
            unreadable: None,
        },
        last_copy: 0,
        same: 0,
        changed: Vec::new(),
        changed_count: 0,
        limit: args.limit,
        missing: Ranges::new(1000),
        database_only: Ranges::new(1000),
        beyond: Ranges::new(1),
        fork: None,
        touched: args.rules.touched()?,
        unreachable,
        not_compared: 0,
    };
    let bar = records_spinner("comparing", args.output.json);
    let outcome = trusted_copy::read_checked(&args.copy, CopyExpectations::default(), &mut |record| {
        cmp.feed(record);
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    cmp.finish();
    let different = cmp.differs() || !outcome.findings.is_empty();
    if args.output.json {
        outln!("{}", to_json(args, &outcome, &cmp, head, different));
    } else {
        print_text(args, &outcome, &cmp, head);
    }
    Ok(verdict(!different))
}

/// The runs and side effects of the differing events, when any differ.
fn affected_of(c: &Comparison) -> Option<Affected> {
    let t = c.touched.as_ref().filter(|t| t.events > 0)?;
    let seqs = c
        .changed
        .iter()
        .map(|ch| ch.seq)
        .chain(c.missing.list.iter().flat_map(|&(a, b)| [a, b]))
        .chain(c.database_only.list.iter().flat_map(|&(a, b)| [a, b]));
    let (from, to) = seqs.fold((u64::MAX, 0), |(lo, hi), s| (lo.min(s), hi.max(s)));
    Some(Affected {
        from,
        to,
        ranges: Vec::new(),
        touched: t.clone(),
        note: None,
    })
}

/// A value's readable form: text escaped as Rust escapes it, or, when the
/// bytes are not UTF-8, each byte that is not printable ASCII as `\xNN`
/// (two different invalid byte strings never look alike).
fn readable(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.escape_debug().collect(),
        Err(_) => bytes.escape_ascii().to_string(),
    }
}

/// The part of a long value worth showing: from a little before the first
/// byte where it differs from `other`, `SHOWN_CHARS` characters, with "..."
/// where text is left out.
fn window(bytes: &[u8], other: &[u8]) -> String {
    let text = readable(bytes);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= SHOWN_CHARS {
        return text;
    }
    let first_diff = bytes.iter().zip(other).take_while(|(a, b)| a == b).count();
    // Approximate the character position of the first differing byte.
    let at = readable(&bytes[..first_diff.min(bytes.len())]).chars().count();
    let start = at
        .saturating_sub(SHOWN_CHARS / 4)
        .min(chars.len().saturating_sub(SHOWN_CHARS));
    let end = (start + SHOWN_CHARS).min(chars.len());
    let middle: String = chars[start..end].iter().collect();
    format!(
        "{}{middle}{}",
        if start > 0 { "..." } else { "" },
        if end < chars.len() { "..." } else { "" }
    )
}

/// A value for display: shortened around its first difference, with its length when long.
fn shown(bytes: &[u8], other: &[u8]) -> String {
    let w = window(bytes, other);
    if w.len() < readable(bytes).len() {
        let first_diff = bytes.iter().zip(other).take_while(|(a, b)| a == b).count();
        format!("\"{w}\" ({} bytes, first difference at byte {first_diff})", bytes.len())
    } else {
        format!("\"{w}\"")
    }
}

fn json_value(bytes: &[u8], other: &[u8]) -> Value {
    window(bytes, other).into()
}

/// Why the database lacks a range: cut when it ends before it.
fn missing_why(start: u64, head: u64) -> &'static str {
    if start > head { "cut" } else { "deleted" }
}

fn range_text(a: u64, b: u64) -> String {
    if a == b {
        format!("seq {a}")
    } else {
        format!("seqs {a} to {b} ({} events)", b - a + 1)
    }
}

fn print_text(args: &DiffArgs, o: &CopyOutcome, c: &Comparison, head: u64) {
    outln!("{}", trusted_copy::summary(&args.copy.source, o));
    for w in &o.warnings {
        outln!("warning: {w}");
    }
    for f in &o.findings {
        outln!("the copy: {}", report::finding_text(f));
    }
    let trusted = o.last_trusted.map_or(0, |h| h.seq);
    if let Some((seq, copy, database)) = &c.fork {
        outln!("fork at seq {seq}: from here the database's chain is not the copy's");
        outln!("  copy:     {copy}\n  database: {database}");
    }
    for ch in &c.changed {
        let names: Vec<&str> = ch.fields.iter().map(|f| f.field).collect();
        let untrusted = if ch.seq > trusted {
            " [past the last trusted head]"
        } else {
            ""
        };
        outln!(
            "changed at seq {} (run {}): {}{untrusted}",
            ch.seq,
            ch.run_id,
            names.join(", ")
        );
        for f in &ch.fields {
            outln!("  {:<12} copy:     {}", f.field, shown(&f.copy, &f.database));
            outln!("  {:<12} database: {}", "", shown(&f.database, &f.copy));
        }
    }
    if c.changed_count > c.changed.len() as u64 {
        outln!(
            "... and {} more changed event(s) (--limit shows more)",
            c.changed_count - c.changed.len() as u64
        );
    }
    for &(a, b) in &c.missing.list {
        let why = match missing_why(a, head) {
            // Records no trusted head vouches for prove nothing was cut.
            _ if a > trusted => {
                format!("after the last trusted head, seq {trusted}: no head vouches for them, so they show no cut")
            }
            "cut" => format!("cut: the database ends at seq {head}"),
            _ => "deleted".to_owned(),
        };
        outln!("missing from the database: {} ({why})", range_text(a, b));
    }
    for &(a, b) in &c.database_only.list {
        outln!("in the database only: {} (the copy lacks them)", range_text(a, b));
    }
    if c.missing.more || c.database_only.more {
        outln!("... more ranges than shown (see the counts)");
    }
    if let Some(value) = &c.unreachable {
        outln!(
            "in the database only: {}",
            chainship_chain::check::unreachable_reason(value)
        );
    }
    if let Some(b) = &c.db.broken {
        outln!("the database's own chain breaks at seq {}: {}", b.seq, b.reason());
    }
    if let Some(e) = &c.db.unreadable {
        outln!(
            "the database could not be read on: {e} ({} copy record(s) not compared)",
            c.not_compared
        );
    }
    if let Some(&(a, _)) = c.beyond.list.first() {
        outln!(
            "beyond the copy: {} (not yet exported, or added after a rollback)",
            range_text(a, head)
        );
    }
    if let Some(a) = affected_of(c) {
        for line in affected::lines(&a) {
            outln!("{line}");
        }
    }
    outln!(
        "compared: {} the same, {} changed, {} missing from the database, {} in the database only, {} beyond the copy",
        c.same,
        c.changed_count,
        c.missing.count,
        c.database_only.count,
        c.beyond.count
    );
    if !c.differs() && o.findings.is_empty() {
        outln!("ok: the database holds the trusted copy's events unchanged");
    }
    match o.last_trusted {
        Some(h) => outln!("last trusted head: seq {} {}", h.seq, h.hash_str()),
        None => outln!("last trusted head: none"),
    }
}

fn to_json(args: &DiffArgs, o: &CopyOutcome, c: &Comparison, head: u64, different: bool) -> Value {
    let trusted = o.last_trusted.map_or(0, |h| h.seq);
    let changed: Vec<Value> = c
        .changed
        .iter()
        .map(|ch| {
            json!({
                "seq": ch.seq,
                "run_id": ch.run_id,
                "trusted": ch.seq <= trusted,
                "fields": ch.fields.iter().map(|f| json!({
                    "field": f.field,
                    "copy": json_value(&f.copy, &f.database),
                    "database": json_value(&f.database, &f.copy),
                    "copy_bytes": f.copy.len(),
                    "database_bytes": f.database.len(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let ranges = |r: &Ranges, why: &dyn Fn(u64) -> Option<&'static str>| -> Vec<Value> {
        r.list
            .iter()
            .map(|&(a, b)| {
                let mut v = json!({"from": a, "to": b, "count": b - a + 1});
                if let Some(w) = why(a) {
                    v["why"] = w.into();
                }
                v
            })
            .collect()
    };
    let mut doc = json!({
        "status": if different { "different" } else { "same" },
        "copy": trusted_copy::json_fields(&args.copy.source, o),
        // The copy's verdict, where every verifier puts its findings.
        "findings": o.findings.iter().map(crate::report::finding_json).collect::<Vec<_>>(),
        "database": {"path": args.db.db.as_ref().map(|p| p.display().to_string()), "head_seq": head},
        "counts": {
            "same": c.same,
            "changed": c.changed_count,
            "missing": c.missing.count,
            "database_only": c.database_only.count,
            "beyond_copy": c.beyond.count,
        },
        "changed": changed,
        "changed_shown": c.changed.len(),
        "missing": ranges(&c.missing, &|a| {
            let trusted = o.last_trusted.map_or(0, |h| h.seq);
            Some(if a > trusted { "unvouched" } else { missing_why(a, head) })
        }),
        "database_only": ranges(&c.database_only, &|_| None),
        "beyond_copy": c.beyond.list.first().map(|&(a, _)| json!({"from": a, "to": head, "count": c.beyond.count})),
        "fork": c.fork.as_ref().map(|(seq, copy, database)| json!({"seq": seq, "copy_hash": copy, "database_hash": database})),
        "unreachable_row": c.unreachable.as_ref().map(|v| chainship_chain::check::unreachable_reason(v)),
        "database_break": c.db.broken.as_ref().map(|b| json!({"seq": b.seq, "reason": b.reason()})),
        "database_unreadable": c.db.unreadable.as_ref().map(|e| json!({"error": e, "copy_records_not_compared": c.not_compared})),
        "last_trusted_head": o.last_trusted.map(|h| json!({"seq": h.seq, "hash": h.hash_str()})),
        "affected": affected_of(c).as_ref().map(affected::json),
    });
    if c.missing.more || c.database_only.more {
        doc["ranges_truncated"] = true.into();
    }
    doc
}
