//! Which redaction statements a verifier trusts, and what it says of them.
//!
//! `--redaction-key` names the keys that may authorize erasure. Every
//! statement kept for the origin is read once, before the check: one whose
//! signature by such a key verifies, that names this origin and the seq its
//! name says, goes into the [`Redactions`] the chain check accepts blanked
//! rows and tombstones against ([`chainship_chain::redaction`]). One that a
//! trusted key's line does not verify for, or that names another origin or
//! seq, is a `redaction` finding; one signed by no trusted redaction key is
//! only a warning (it is never accepted, so a tombstone relying on it is
//! still `altered`).
//!
//! After the check, [`judge`] holds each trusted statement to the chain: its
//! hash must be the one the database or copy holds at its seq, and the seq
//! must be vouched for by a trusted head or checkpoint. A statement never
//! vouches for anything itself.

use std::sync::Arc;

use chainship_anchor::AnchorStore;
use chainship_anchor::note::{SignedNote, VerifierKey};
use chainship_anchor::redaction::{self, Statement};
use chainship_chain::redaction::{Covered, Redactions};
use chainship_chain::{Error, HexHash};

use crate::finding::{Finding, Kind};

/// A seq a verifier accepted as redacted, as the verdict names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redacted {
    pub seq: u64,
    /// The statement's path under the origin, its key's name and reason.
    pub statement: String,
    pub key: String,
    pub reason: String,
}

/// The statements read for one origin.
#[derive(Debug, Default)]
pub struct Loaded {
    pub redactions: Redactions,
    pub findings: Vec<Finding>,
    pub warnings: Vec<String>,
}

impl Loaded {
    /// The trusted redactions, shared with the chain check (`None`: none).
    pub fn shared(&self) -> Option<Arc<Redactions>> {
        (!self.redactions.is_empty()).then(|| Arc::new(self.redactions.clone()))
    }
}

/// Reads and judges every statement kept for `origin` (see the module doc).
/// With no key, nothing is read: no redaction is accepted.
pub async fn load(store: &AnchorStore, origin: &str, keys: &[VerifierKey]) -> Result<Loaded, Error> {
    let mut loaded = Loaded::default();
    if keys.is_empty() {
        return Ok(loaded);
    }
    for (path, named_seq, bytes) in redaction::list(store, origin).await? {
        judge_one(&mut loaded, origin, keys, &path, named_seq, &bytes);
    }
    Ok(loaded)
}

/// One kept statement as `anchor list` shows it.
#[derive(Debug)]
pub struct ListedStatement {
    pub path: String,
    /// The statement, when its text is one.
    pub statement: Option<Statement>,
    /// The key names of its signature lines (unverified).
    pub signed_by: Vec<String>,
    /// With redaction keys: whether a verifier accepts it, and if not why
    /// (a finding's or warning's message).
    pub trusted: Option<bool>,
    pub problem: Option<String>,
}

/// Every statement kept for `origin`, each judged by `keys` when given.
pub async fn list(store: &AnchorStore, origin: &str, keys: &[VerifierKey]) -> Result<Vec<ListedStatement>, Error> {
    let mut out = Vec::new();
    for (path, named_seq, bytes) in redaction::list(store, origin).await? {
        let note = SignedNote::parse(&bytes).ok();
        let mut listed = ListedStatement {
            path: path.clone(),
            statement: note.as_ref().and_then(|n| Statement::parse_text(&n.text).ok()),
            signed_by: note.map_or_else(Vec::new, |n| {
                let mut names: Vec<String> = n.signatures.into_iter().map(|s| s.name).collect();
                names.sort();
                names.dedup();
                names
            }),
            trusted: None,
            problem: None,
        };
        if !keys.is_empty() {
            let mut judged = Loaded::default();
            judge_one(&mut judged, origin, keys, &path, named_seq, &bytes);
            listed.trusted = Some(!judged.redactions.is_empty());
            listed.problem = judged
                .findings
                .first()
                .map(|f| f.message.clone())
                .or_else(|| judged.warnings.first().cloned());
        }
        out.push(listed);
    }
    Ok(out)
}

/// Judges one kept statement (see the module doc).
pub fn judge_one(
    loaded: &mut Loaded,
    origin: &str,
    keys: &[VerifierKey],
    path: &str,
    named_seq: Option<u64>,
    bytes: &[u8],
) {
    let place = format!("{origin}/{path}");
    let finding = |seq: Option<u64>, msg: String| Finding::new(Kind::Redaction, seq, msg).at(Some(place.clone()));
    let Ok(note) = SignedNote::parse(bytes) else {
        loaded
            .findings
            .push(finding(named_seq, format!("{place}: not a signed note")));
        return;
    };
    let mut signer = None;
    for key in keys {
        match key.check(&note) {
            Some(true) => signer = signer.or(Some(key)),
            Some(false) => {
                loaded.findings.push(finding(
                    named_seq,
                    format!(
                        "{place}: the signature of redaction key {:?} does not verify (forged or altered)",
                        key.name
                    ),
                ));
                return;
            }
            None => {}
        }
    }
    let Some(key) = signer else {
        loaded.warnings.push(format!(
            "{place}: signed by no trusted redaction key: not accepted (a tombstone relying on it is altered)"
        ));
        return;
    };
    let statement = match Statement::parse_text(&note.text) {
        Ok(s) => s,
        Err(e) => {
            loaded.findings.push(finding(
                named_seq,
                format!("{place}: not a redaction statement: {}", e.message),
            ));
            return;
        }
    };
    if statement.origin != origin {
        loaded.findings.push(finding(
            Some(statement.seq),
            format!(
                "{place}: the statement names origin {:?}, not {origin:?} (moved from another origin's folder)",
                statement.origin
            ),
        ));
        return;
    }
    if named_seq != Some(statement.seq) {
        loaded.findings.push(finding(
            Some(statement.seq),
            format!(
                "{place}: the statement names seq {}, not the seq of its name (moved onto another seq)",
                statement.seq
            ),
        ));
        return;
    }
    if !key.trusted_for(origin, statement.seq) {
        loaded.warnings.push(format!(
            "{place}: redaction key {:?} is not trusted for this origin or seq: not accepted",
            key.name
        ));
        return;
    }
    loaded.redactions.insert(
        statement.seq,
        Covered {
            hash: statement.hash,
            fields: statement.fields,
            statement: path.into(),
            key: key.name.as_str().into(),
            reason: statement.reason.as_str().into(),
        },
    );
}

/// Holds each trusted statement to the chain once it is checked:
/// `hash_at(seq)` is the hash the database or copy holds at that seq (`None`:
/// it holds none), `vouched_through` the highest seq a trusted head or
/// checkpoint vouches for, `accepted` the seqs the check accepted as
/// redacted, `still_held` those where it met the event whole (its payload
/// still there), both ascending. Returns the findings, the warnings (a statement whose
/// event still holds its payload), and what the verdict names as redacted.
pub fn judge(
    redactions: &Redactions,
    hash_at: &mut dyn FnMut(u64) -> Option<HexHash>,
    vouched_through: Option<u64>,
    (accepted, still_held): (&[u64], &[u64]),
    what: &str,
) -> (Vec<Finding>, Vec<String>, Vec<Redacted>) {
    let (mut findings, mut warnings, mut named) = (Vec::new(), Vec::new(), Vec::new());
    for (seq, c) in redactions.iter() {
        let place = Some(c.statement.to_string());
        if vouched_through.is_none_or(|v| seq > v) {
            findings.push(
                Finding::new(
                    Kind::Redaction,
                    Some(seq),
                    format!(
                        "{}: a redaction of seq {seq}, which no trusted head or checkpoint vouches for{}",
                        c.statement,
                        vouched_through.map_or(String::new(), |v| format!(" (they reach seq {v})"))
                    ),
                )
                .at(place.clone()),
            );
            continue;
        }
        match hash_at(seq) {
            Some(h) if h != c.hash => {
                let mut f = Finding::new(
                    Kind::Redaction,
                    Some(seq),
                    format!(
                        "{}: the statement's hash is not the hash {what} holds at seq {seq}",
                        c.statement
                    ),
                )
                .at(place.clone());
                f.expected = Some(String::from_utf8_lossy(&h).into_owned());
                f.found = Some(String::from_utf8_lossy(&c.hash).into_owned());
                findings.push(f);
            }
            Some(_) => {
                if accepted.binary_search(&seq).is_ok() {
                    named.push(Redacted {
                        seq,
                        statement: c.statement.to_string(),
                        key: c.key.to_string(),
                        reason: c.reason.to_string(),
                    });
                }
                if still_held.binary_search(&seq).is_ok() {
                    warnings.push(format!(
                        "seq {seq} is redacted ({}), but {what} still holds its payload",
                        c.statement
                    ));
                }
            }
            None => {}
        }
    }
    (findings, warnings, named)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;

    fn key(name: &str, seed: u8) -> (SigningKey, VerifierKey) {
        let sk = SigningKey::from_bytes(&[seed; 32]);
        let vk = VerifierKey::new(name, sk.verifying_key());
        (sk, vk)
    }

    fn statement(origin: &str, seq: u64) -> Statement {
        Statement {
            origin: origin.into(),
            seq,
            hash: [b'a'; 64],
            fields: [b'b'; 64],
            redacted: "2026-12-06T22:00:00Z".into(),
            reason: "a token".into(),
        }
    }

    fn signed(s: &Statement, keys: &[(&str, &SigningKey)]) -> Vec<u8> {
        SignedNote::sign(&s.text(), keys).to_text().into_bytes()
    }

    fn judged(bytes: &[u8], named: Option<u64>, trusted: &[VerifierKey]) -> Loaded {
        let mut loaded = Loaded::default();
        judge_one(&mut loaded, "prod/a", trusted, "redactions/x", named, bytes);
        loaded
    }

    #[test]
    fn only_a_trusted_statement_of_this_origin_and_seq_is_accepted() {
        let (sk, vk) = key("erasure", 1);
        let (other_sk, _) = key("someone", 2);
        let s = statement("prod/a", 7);
        let good = judged(&signed(&s, &[("erasure", &sk)]), Some(7), std::slice::from_ref(&vk));
        assert!(good.findings.is_empty() && good.warnings.is_empty());
        assert_eq!(good.redactions.get(7).unwrap().key.as_ref(), "erasure");
        // Another key's statement: never accepted, said as a warning.
        let untrusted = judged(
            &signed(&s, &[("someone", &other_sk)]),
            Some(7),
            std::slice::from_ref(&vk),
        );
        assert!(untrusted.redactions.is_empty() && untrusted.findings.is_empty());
        assert_eq!(untrusted.warnings.len(), 1);
        // A forged line under the trusted key's name and id: a finding.
        let mut forged = SignedNote::sign(&s.text(), &[("erasure", &other_sk)]);
        forged.signatures[0].id = vk.id;
        let forged = judged(forged.to_text().as_bytes(), Some(7), std::slice::from_ref(&vk));
        assert!(forged.redactions.is_empty());
        assert_eq!(forged.findings[0].kind, Kind::Redaction);
        // The text changed after signing: a finding.
        let altered = String::from_utf8(signed(&s, &[("erasure", &sk)]))
            .unwrap()
            .replace("seq 7", "seq 8");
        assert_eq!(
            judged(altered.as_bytes(), Some(8), std::slice::from_ref(&vk))
                .findings
                .len(),
            1
        );
        // Another origin's statement, or one copied onto another seq's name.
        let elsewhere = judged(
            &signed(&statement("prod/b", 7), &[("erasure", &sk)]),
            Some(7),
            std::slice::from_ref(&vk),
        );
        assert!(elsewhere.redactions.is_empty() && elsewhere.findings[0].message.contains("prod/b"));
        let moved = judged(&signed(&s, &[("erasure", &sk)]), Some(8), std::slice::from_ref(&vk));
        assert!(moved.redactions.is_empty() && moved.findings[0].message.contains("seq 7"));
        // A key scoped to another origin is not trusted here.
        let mut scoped = vk.clone();
        scoped.only_origin = Some("prod/b".into());
        let scoped = judged(&signed(&s, &[("erasure", &sk)]), Some(7), &[scoped]);
        assert!(scoped.redactions.is_empty());
    }

    #[test]
    fn a_statement_is_held_to_the_chain() {
        let mut r = Redactions::default();
        for seq in [3, 5, 9, 12] {
            r.insert(
                seq,
                Covered {
                    hash: [b'a'; 64],
                    fields: [b'b'; 64],
                    statement: format!("redactions/{seq}").into(),
                    key: "erasure".into(),
                    reason: "a token".into(),
                },
            );
        }
        let mut hash_at = |seq: u64| match seq {
            5 => Some([b'c'; 64]),
            12 => None,
            _ => Some([b'a'; 64]),
        };
        let (findings, warnings, named) = judge(&r, &mut hash_at, Some(10), (&[3], &[9]), "the database");
        // 5: another hash; 12: past what is vouched for.
        let seqs: Vec<_> = findings.iter().map(|f| f.seq).collect();
        assert_eq!(seqs, [Some(5), Some(12)]);
        // 9 still holds its payload; 3 was accepted.
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("seq 9"));
        assert_eq!(named.iter().map(|n| n.seq).collect::<Vec<_>>(), [3]);
        // Nothing vouched for at all: every statement is a finding.
        assert_eq!(judge(&r, &mut hash_at, None, (&[3], &[]), "the copy").0.len(), 4);
    }
}
