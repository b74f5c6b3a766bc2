//! How findings and runs are shown, shared by the commands that judge a
//! database or a copy against the kept heads.

use chainship_anchor::Finding;
use chainship_chain::Head;
use serde_json::json;

use crate::exit::CliError;

/// A finding as text: kind, seq and message, then the hashes and the head file.
pub fn finding_text(f: &Finding) -> String {
    let mut line = format!(
        "{}{}: {}",
        f.kind,
        f.seq.map_or(String::new(), |s| format!(" at seq {s}")),
        f.message
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
        "message": f.message,
        "expected": f.expected,
        "found": f.found,
        "source": f.source,
    })
}

/// The findings, then `ok: ...` if there are none, then the last trusted head.
pub fn print_outcome(findings: &[Finding], ok: &str, last_trusted: Option<Head>) {
    for f in findings {
        outln!("{}", finding_text(f));
    }
    if findings.is_empty() {
        outln!("ok: {ok}");
    }
    match last_trusted {
        Some(h) => outln!("last trusted head: seq {} {}", h.seq, h.hash_str()),
        None => outln!("last trusted head: none"),
    }
}

/// Writes one line to stdout. When the reader has gone (a closed pipe) the
/// process exits as Unix tools do on SIGPIPE (status 141), without a panic;
/// any other write error is a setup error (exit 2).
pub fn stdout_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| out.write_all(b"\n"));
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("chainship: writing to stdout: {e}");
        std::process::exit(i32::from(crate::exit::USAGE));
    }
}

/// A small runtime for commands that make a few async calls.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::usage(format!("cannot start the async runtime: {e}")))
}
