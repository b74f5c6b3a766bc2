//! `report.html`: the run as a page a person reads — one self-contained
//! file (no script, no request: style inline, no external font or image),
//! a timeline of the run's events with each one's proof, the findings, and
//! side effects to reconcile highlighted; laid out to print.

use std::fmt::Write;

use super::check::EvidenceReport;
use super::run_json::role_label;

/// Text made safe for HTML content and attribute values.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Bidirectional overrides could reorder what the page shows: shown as code points.
            // Control characters, and bidirectional overrides that could reorder what
            // the page shows, are shown as code points.
            c if (c.is_control() && c != '\n')
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
            {
                out.push_str(&c.escape_unicode().to_string())
            }
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem;color:#1b1b1b;line-height:1.4}
h1{font-size:1.5rem;margin:0 0 .5rem}h2{font-size:1.15rem;margin:1.5rem 0 .5rem}
.verdict{padding:.6rem 1rem;border-radius:4px;font-weight:600;margin:1rem 0}
.ok{background:#e3f4e6;border:1px solid #3a8a4b}.warn{background:#fff3d6;border:1px solid #b58100}
.bad{background:#fde4e4;border:1px solid #b3261e}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{border-bottom:1px solid #ddd;padding:.25rem .4rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.at,td.step{white-space:nowrap}
table.facts th{width:14rem;background:none}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.85em;word-break:break-all}
tr.role-tool td.part{color:#6a3d9a;font-weight:600}tr.role-model td.part{color:#1f5f99}
tr.role-approval td.part{color:#9a5b00}tr.role-decision td.part{color:#2e7d32}
tr.finding{background:#fff3d6}tr.reconcile{background:#fde4e4}
tr.reconcile td:first-child{border-left:4px solid #b3261e}
.tag{display:inline-block;padding:0 .35rem;border-radius:3px;font-size:.75rem;font-weight:600}
.tag.proven{background:#e3f4e6;color:#1e5e2c}.tag.unproven{background:#fde4e4;color:#8c1d18}
.tag.reconcile{background:#b3261e;color:#fff}
@media print{body{margin:0;font-size:10pt}tr{page-break-inside:avoid}
.verdict,tr.finding,tr.reconcile,.tag{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
";

pub fn render(r: &EvidenceReport) -> String {
    let cp = &r.checkpoint;
    let reconcile: Vec<u64> = r.to_reconcile().map(|f| f.seq).collect();
    let finding_seqs: Vec<u64> = r.findings.iter().map(|f| f.seq).collect();
    let not_proven = r.not_proven();
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
<title>Evidence for run {run}</title><style>{STYLE}</style></head><body>\n\
<h1>Evidence for run <span class=\"mono\">{run}</span></h1>\n",
        run = esc(&r.run_id)
    );
    let (class, verdict) = match (r.all_proven(), r.findings.len()) {
        (true, 0) => (
            "ok",
            format!(
                "Every event proven ({} events); the run check found nothing.",
                r.records.len()
            ),
        ),
        (true, n) => (
            "warn",
            format!(
                "Every event proven ({} events); the run check found {n} finding(s).",
                r.records.len()
            ),
        ),
        (false, n) => (
            "bad",
            format!(
                "NOT PROVEN: {} problem(s) with the evidence; the run check found {n} finding(s).",
                not_proven.len()
            ),
        ),
    };
    let _ = writeln!(
        h,
        "<div class=\"verdict {class}\" id=\"verdict\">{}</div>",
        esc(&verdict)
    );

    let _ = writeln!(h, "<h2>What this is proven against</h2><table class=\"facts\">");
    let mut fact = |name: &str, value: String| {
        let _ = writeln!(h, "<tr><th>{}</th><td>{value}</td></tr>", esc(name));
    };
    fact("Log (origin)", format!("<code>{}</code>", esc(&cp.origin)));
    fact(
        "Checkpoint",
        format!("size {} &middot; root <code>{}</code>", cp.size, esc(&cp.root_b64)),
    );
    fact(
        "Signed by",
        if cp.signers.is_empty() {
            "no trusted key".into()
        } else {
            esc(&cp.signers.join(", "))
        },
    );
    fact(
        "Cosigned by witnesses",
        if cp.witnesses.is_empty() {
            "none checked".into()
        } else {
            esc(&cp.witnesses.join(", "))
        },
    );
    fact(
        "Newest head",
        format!("seq {} &middot; published {}", r.head.seq, esc(&r.head.published)),
    );
    fact(
        "Log time at the checkpoint",
        format!("{} (seq {})", esc(&r.newest.1), r.newest.0),
    );
    if let Some(s) = &r.summary {
        fact(
            "Run",
            format!(
                "{} &middot; seqs {}&ndash;{} &middot; {} events, {} tool calls, {} side effects",
                esc(s.status.as_str()),
                s.first_seq,
                s.last_seq,
                s.events,
                s.tool_calls,
                s.side_effects
            ),
        );
    }
    if let Some(g) = &r.gaps {
        fact(
            "Every position accounted for",
            format!(
                "seqs {}&ndash;{}: {} other events {}{}",
                g.first,
                g.last,
                g.hashes,
                if r.per_record_proofs {
                    "by hash, one range proof"
                } else {
                    "as entries of the tiles"
                },
                if g.problems.is_empty() {
                    ""
                } else {
                    " &mdash; <strong>FAILED</strong>"
                }
            ),
        );
    }
    let _ = writeln!(h, "</table>");

    if !not_proven.is_empty() {
        let _ = writeln!(h, "<h2>Not proven</h2><ul id=\"not-proven\">");
        for (seq, p) in &not_proven {
            let at = seq.map_or(String::new(), |s| format!("seq {s}: "));
            let _ = writeln!(h, "<li>{}{}</li>", at, esc(&p.to_string()));
        }
        let _ = writeln!(h, "</ul>");
    }
    let _ = writeln!(h, "<h2>Run check findings</h2>");
    if r.findings.is_empty() {
        let _ = writeln!(h, "<p id=\"findings\">None.</p>");
    } else {
        let _ = writeln!(h, "<ul id=\"findings\">");
        for f in &r.findings {
            let tag = if reconcile.contains(&f.seq) {
                "<span class=\"tag reconcile\">reconcile</span> "
            } else {
                ""
            };
            let place = [
                ("step", f.step_id.as_str()),
                ("tool", f.tool.as_deref().unwrap_or_default()),
            ]
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!(" {k} <code>{}</code>", esc(v)))
            .collect::<String>();
            let _ = writeln!(
                h,
                "<li>{tag}<strong>{}</strong> at <a href=\"#seq-{seq}\">seq {seq}</a>{place}: {}</li>",
                f.kind,
                esc(&f.message),
                seq = f.seq
            );
        }
        let _ = writeln!(h, "</ul>");
    }
    if !reconcile.is_empty() {
        let _ = writeln!(
            h,
            "<p>Highlighted in red: tool calls that may have acted on the outside world with no outcome recorded. \
Check with the systems they touch whether they did.</p>"
        );
    }

    let _ = writeln!(
        h,
        "<h2>Timeline</h2><table id=\"timeline\"><thead><tr><th>Seq</th><th>Time</th><th>Step</th>\
<th>Part</th><th>Event</th><th>Details</th><th>Proof (checkpoint {})</th></tr></thead><tbody>",
        cp.size
    );
    for e in &r.timeline {
        let role = role_label(e.role);
        let mut classes = format!("role-{role}");
        if reconcile.contains(&e.seq) {
            classes.push_str(" reconcile");
        } else if finding_seqs.contains(&e.seq) {
            classes.push_str(" finding");
        }
        let details: Vec<String> = e
            .details
            .iter()
            .map(|(k, v)| format!("{}=<code>{}</code>", esc(k), esc(v)))
            .collect();
        let proof = if e.proven {
            "<span class=\"tag proven\">proven</span>".to_owned()
        } else {
            "<span class=\"tag unproven\">NOT PROVEN</span>".into()
        };
        let _ = writeln!(
            h,
            "<tr class=\"{classes}\" id=\"seq-{seq}\" data-seq=\"{seq}\" data-proof=\"{status}\"><td class=\"mono\">{seq}</td>\
<td class=\"mono at\">{at}</td><td class=\"mono step\">{step}</td><td class=\"part\">{role}</td><td>{kind}</td><td>{details}</td><td>{proof}</td></tr>",
            seq = e.seq,
            status = if e.proven { "proven" } else { "not-proven" },
            at = esc(&e.at),
            step = esc(&e.step_id),
            kind = esc(&e.kind),
            details = details.join(" "),
        );
    }
    let _ = writeln!(h, "</tbody></table>");
    let _ = writeln!(
        h,
        "<h2>How to check this yourself</h2><p>The bundle this page came with holds each event's record and {}; \
<code>chainship check-evidence</code> checks them all, and README.txt says how to check them \
without chainship. This page is a rendering: the proofs, not the page, are the evidence.</p>\n</body></html>",
        if r.per_record_proofs {
            "its inclusion proof"
        } else {
            "the tiles its inclusion proof is computed from"
        }
    );
    h
}
