//! One run's evidence as a bundle checked offline: the run's records as
//! exported, the C2SP tiles their inclusion proofs against one signed
//! checkpoint are computed from (with the tiles that prove those), that
//! checkpoint with its cosignatures, the signed head at its size, the log's
//! newest event at that size (its time says how long the run has been
//! silent), and optionally the seqs of every other event from the run's
//! creation to the checkpoint, every level-0 tile of that span held. An event
//! whose payload was withheld travels as its tombstone with its signed
//! redaction statement (`redactions/<seq>`), never with the payload.
//!
//! [`build`] gathers it from the database or a checked copy and the anchor
//! store; [`check`] is the one verdict (the tiles and each record's proof in
//! `proving`, the gaps and reveals in [`gaps`]), used by `check-evidence` and by
//! [`build`] itself before anything is handed out; [`run_json`], [`html`]
//! and [`readme`] render what [`check`] found. A bundle is a directory of
//! plain files or one tar file ([`files`]).

pub mod build;
pub mod check;
pub mod files;
pub mod gaps;
pub mod html;
pub mod make;
mod proving;
pub mod readme;
pub mod run_json;

pub use check::{CheckInput, EvidenceReport};
pub use files::BundleFiles;
pub use gaps::{GapsStatus, RevealStatus};

/// The run's records, one per line, in the export's record format, in seq order.
pub const RECORDS: &str = "records.jsonl";
/// The checkpoint every proof is against, with the witnesses' cosignatures.
pub const CHECKPOINT: &str = "checkpoint";
/// The signed head at the checkpoint's size.
pub const HEAD: &str = "head";
/// The log's newest event at the checkpoint's size (seq = its size).
pub const NEWEST: &str = "newest.json";
/// The hash tiles the records' proofs are computed from, and those that
/// prove them (C2SP tlog-tiles: `tile/<L>/<N>[.p/<W>]`, beside `checkpoint`,
/// so the bundle is a tiles directory any C2SP client reads).
pub const TILES_DIR: &str = "tile";
/// Where bundles written before the tiles kept one proof per record:
/// `proofs/<seq>.proof` (still checked where present).
pub const PROOFS_DIR: &str = "proofs";
/// The redaction statement of each tombstone among the records, as the
/// anchor store keeps it: `redactions/<seq, 20 digits>`.
pub const REDACTIONS_DIR: &str = chainship_anchor::store::REDACTIONS_DIR;
/// `--with-gaps`: `<seq> <hash>` for every other event from the run's creation to the checkpoint.
pub const GAPS: &str = "gaps.txt";
/// `--with-gaps`: the range proof of the entries from the run's creation to the checkpoint.
pub const GAPS_PROOF: &str = "gaps.proof";
pub const RUN_JSON: &str = "run.json";
pub const REPORT_HTML: &str = "report.html";
pub const README_TXT: &str = "README.txt";

/// The first line of [`GAPS_PROOF`].
pub const RANGE_PROOF_HEADER: &str = "chainship-range-proof/v1";

/// The proof file of `seq`.
pub fn proof_name(seq: u64) -> String {
    format!("{PROOFS_DIR}/{seq}.proof")
}

/// The files rendered from a checked report, as a bundle holds them: what
/// `evidence` writes and `check-evidence` compares (and `--render` writes).
pub fn renderings(report: &EvidenceReport) -> [(&'static str, Vec<u8>); 3] {
    let json = serde_json::to_string_pretty(&run_json::render(report)).unwrap_or_default() + "\n";
    [
        (RUN_JSON, json.into_bytes()),
        (REPORT_HTML, html::render(report).into_bytes()),
        (README_TXT, readme::render(report).into_bytes()),
    ]
}

/// Text from a bundle made safe for a terminal or a plain-text file: control
/// characters and bidirectional overrides are shown escaped, never obeyed
/// (a record's fields are chosen by whoever wrote the log, or the model).
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| {
            if unsafe_char(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

#[cfg(test)]
mod tests;
