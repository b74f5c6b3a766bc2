//! How findings and runs are shown, shared by the commands that judge a
//! database or a copy against the kept heads.

use std::io::Write;

use chainship_chain::Head;
use chainship_runs::affected;
use chainship_verify::{Finding, Kind, Verdict};
use serde_json::{Value, json};

use crate::exit::CliError;

/// What to look at for a finding, in flags: the library names no flags,
/// only the setting that is a finding's remedy, or its kind.
fn hint(f: &Finding) -> Option<&'static str> {
    if let Some(setting) = f.remedy {
        return Some(crate::exit::flag_for(setting));
    }
    match f.kind {
        Kind::Stale => Some("--max-age"),
        Kind::NoTrustedHead => Some("check --origin and --trusted-key; on a first run pass --allow-no-heads"),
        _ => None,
    }
}

/// A finding's message with the flags it concerns.
fn message(f: &Finding) -> String {
    match hint(f) {
        Some(h) => format!("{} ({h})", f.message),
        None => f.message.clone(),
    }
}

/// A finding as text: kind, seq and message, then the hashes and the head file.
pub fn finding_text(f: &Finding) -> String {
    let mut line = format!(
        "{}{}: {}",
        f.kind,
        f.seq.map_or(String::new(), |s| format!(" at seq {s}")),
        message(f)
    );
    if let Some(e) = &f.expected {
        line += &format!("\n  expected: {e}");
    }
    if let Some(found) = &f.found {
        line += &format!(
            "\n  found:    {}",
            if found.is_empty() { "(no such event)" } else { found }
        );
    }
    if let Some(s) = &f.source
        && !f.message.contains(s.as_str())
    {
        line += &format!("\n  head:     {s}");
    }
    line
}

pub fn finding_json(f: &Finding) -> serde_json::Value {
    json!({
        "kind": f.kind.as_str(),
        "seq": f.seq,
        "message": message(f),
        "expected": f.expected,
        "found": f.found,
        "source": f.source,
    })
}

/// What every verdict says as JSON: its status, findings, warnings, last
/// trusted head, unvouched tail, exact invalid ranges and the runs they
/// touch. Each command adds what it covered ([`with`]).
pub fn verdict_json<C>(v: &Verdict<C>) -> Value {
    json!({
        "status": v.status(),
        "findings": v.findings.iter().map(finding_json).collect::<Vec<_>>(),
        "warnings": v.warnings,
        "last_trusted_head": v.last_trusted.map(|h| json!({"seq": h.seq, "hash": h.hash_str()})),
        "unvouched": v.unvouched.map(|(first, last)| json!({"from": first, "to": last, "records": v.unvouched_count()})),
        "invalid_ranges": v.ranges.as_ref().map(|rs| rs.iter().map(affected::range_json).collect::<Vec<_>>()),
        "affected": v.touched.as_ref().map(affected::json),
        "redacted": v.redacted.iter().map(|r| json!({"seq": r.seq, "statement": r.statement, "key": r.key, "reason": r.reason})).collect::<Vec<_>>(),
    })
}

/// One line per seq accepted as redacted.
pub fn redacted_lines<C>(v: &Verdict<C>) -> impl Iterator<Item = String> + '_ {
    v.redacted.iter().map(|r| {
        format!(
            "redacted: seq {} (payload withheld; statement {}, key {:?}: {})",
            r.seq, r.statement, r.key, r.reason
        )
    })
}

/// `doc` (a JSON object) with `fields` added.
pub fn with(mut doc: Value, fields: Value) -> Value {
    if let (Some(doc), Value::Object(fields)) = (doc.as_object_mut(), fields) {
        doc.extend(fields);
    }
    doc
}

/// A verdict as text, after the command's own lines: its warnings, its
/// findings (or `ok: ...` when it passed), the last trusted head, and the
/// runs the invalid seqs touch.
pub fn print_verdict<C>(v: &Verdict<C>, ok: &str) {
    for w in &v.warnings {
        outln!("warning: {w}");
    }
    for line in redacted_lines(v) {
        outln!("{line}");
    }
    print_findings(&v.findings, "", ok, v.last_trusted);
    for line in v.touched.iter().flat_map(affected::lines) {
        outln!("{line}");
    }
}

/// The findings (each after `prefix`), then `ok: ...` if there are none,
/// then the last trusted head.
pub fn print_findings(findings: &[Finding], prefix: &str, ok: &str, last_trusted: Option<Head>) {
    for f in findings {
        outln!("{prefix}{}", finding_text(f));
    }
    if findings.is_empty() {
        outln!("ok: {ok}");
    }
    match last_trusted {
        Some(h) => outln!("last trusted head: seq {} {}", h.seq, h.hash_str()),
        None => outln!("last trusted head: none"),
    }
}

pub use crate::exit::CLOSED_STDOUT;

/// Writes one line to stdout. When the reader has gone (a closed pipe) the
/// process exits as Unix tools do on SIGPIPE (status 141), without a panic;
/// any other write error is a setup error (exit 2).
pub fn stdout_line(args: std::fmt::Arguments<'_>) {
    if let Err(e) = try_stdout_line(args) {
        if e.code != CLOSED_STDOUT {
            // Never `eprintln!`: it panics when stderr is closed too.
            let _ = writeln!(std::io::stderr(), "chainship: {e}");
        }
        std::process::exit(i32::from(e.code));
    }
}

/// Writes one line to stdout, or returns the error (code 141 for a closed
/// pipe) to a caller that must clean up before it exits.
pub fn try_stdout_line(args: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| out.write_all(b"\n"));
    match written {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(CliError {
            code: CLOSED_STDOUT,
            message: "stdout was closed".into(),
        }),
        Err(e) => Err(CliError::usage(format!("writing to stdout: {e}"))),
    }
}

/// A small runtime for commands that make a few async calls.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::usage(format!("cannot start the async runtime: {e}")))
}
