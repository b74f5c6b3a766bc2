//! C2SP signed notes (<https://c2sp.org/signed-note>), Ed25519 only.
//!
//! A signed note is a text ending in a newline, a blank line, then one or
//! more lines `— <key name> <base64(key id || signature)>`. The signature
//! covers the text including its final newline. The key id is the first
//! four bytes of SHA-256(key name || 0x0A || 0x01 || public key).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use chainship_chain::{Error, permanent};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

/// The signature type byte for Ed25519.
pub const ED25519: u8 = 0x01;
const SIG_PREFIX: &str = "\u{2014} ";

/// The key id of an Ed25519 key with this name.
pub fn key_id(name: &str, public: &[u8; 32]) -> [u8; 4] {
    typed_key_id(name, ED25519, public)
}

/// The key id of a key of signature type `kind` (`0x01` note signatures,
/// `0x04` cosignatures): `SHA-256(name || 0x0A || kind || public key)[:4]`.
pub fn typed_key_id(name: &str, kind: u8, public: &[u8; 32]) -> [u8; 4] {
    let mut sha = Sha256::new();
    sha.update(name.as_bytes());
    sha.update([b'\n', kind]);
    sha.update(public);
    let digest = sha.finalize();
    [digest[0], digest[1], digest[2], digest[3]]
}

/// Parses a C2SP verifier key `<name>+<hex key id>+<base64(kind || public
/// key)>` of signature type `kind` (Ed25519), checking the id. `what` names
/// the key in messages.
pub fn parse_vkey(text: &str, kind: u8, what: &str) -> Result<(String, [u8; 4], VerifyingKey), Error> {
    // A private key handed over by mistake is never echoed: messages end up in logs and mail.
    if text.trim_start().starts_with("PRIVATE+KEY") {
        return Err(permanent!(
            "{what}: this is a private signing key (PRIVATE+KEY+…), not a verifier key: give the verifier key `chainship keygen` printed, and keep the private key with the follower only"
        ));
    }
    let shown = shown_key(text);
    let bad = |why: &str| permanent!("{what} {shown}: {why} (expected NAME+KEYID+BASE64)");
    // The shipped examples hold an all-zero placeholder: say what to put there.
    if text.trim().split('+').nth(1) == Some("00000000") && text.trim_end().ends_with("AAAAAAAA") {
        return Err(permanent!(
            "{what} {:?} is the example's placeholder: replace it with the verifier key `chainship keygen` printed for the follower's signing key",
            text.trim()
        ));
    }
    // The name holds no '+', the base64 may: split from the left.
    let mut parts = text.trim().splitn(3, '+');
    let (Some(name), Some(id), Some(blob)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad("not three parts"));
    };
    if !valid_key_name(name) {
        return Err(bad("bad key name"));
    }
    let id: [u8; 4] = hex::decode(id)
        .ok()
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| bad("bad key id"))?;
    let blob = B64.decode(blob).map_err(|_| bad("key is not base64"))?;
    if blob.len() != 33 || blob[0] != kind {
        return Err(bad(&format!("not an Ed25519 key of type 0x{kind:02x}")));
    }
    let public: [u8; 32] = blob[1..].try_into().expect("32 bytes");
    let key = VerifyingKey::from_bytes(&public).map_err(|_| bad("not a valid Ed25519 point"))?;
    // A point of small order: no signature under it ever verifies (verify_strict
    // refuses them all), so trusting it could only hide a setup mistake.
    if key.is_weak() {
        return Err(bad("a point of small order, under which no signature can verify"));
    }
    if typed_key_id(name, kind, &public) != id {
        return Err(bad("key id does not match the name and key"));
    }
    Ok((name.to_owned(), id, key))
}

/// A key text as messages show it: its name and id, never the key bytes
/// (a secret pasted in the wrong place must not reach a log), or only its
/// length when it has no name.
fn shown_key(text: &str) -> String {
    let text = text.trim();
    match text.splitn(3, '+').collect::<Vec<_>>().as_slice() {
        [name, id, _] => format!("{:?}", format!("{name}+{id}+…")),
        _ => format!("({} characters, no NAME+KEYID+BASE64 form)", text.chars().count()),
    }
}

/// A key name: non-empty, no whitespace, no `+`.
pub fn valid_key_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c == '+' || c.is_control())
}

/// One signature line, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteSignature {
    pub name: String,
    pub id: [u8; 4],
    pub signature: Vec<u8>,
}

/// A signed note split into its text and signatures (none verified yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedNote {
    pub text: String,
    pub signatures: Vec<NoteSignature>,
}

/// Why a text is no signed note (C2SP signed-note).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NoteError {
    #[error("not a signed note: {0}")]
    Malformed(&'static str),
}

impl SignedNote {
    /// Signs `text` (which must end in a newline and hold no blank line) with every key.
    pub fn sign(text: &str, keys: &[(&str, &SigningKey)]) -> SignedNote {
        let signatures = keys
            .iter()
            .map(|(name, key)| NoteSignature {
                name: (*name).to_owned(),
                id: key_id(name, key.verifying_key().as_bytes()),
                signature: key.sign(text.as_bytes()).to_bytes().to_vec(),
            })
            .collect();
        SignedNote {
            text: text.to_owned(),
            signatures,
        }
    }

    /// The wire form.
    pub fn to_text(&self) -> String {
        let mut out = self.text.clone();
        out.push('\n');
        for s in &self.signatures {
            let mut blob = s.id.to_vec();
            blob.extend_from_slice(&s.signature);
            out.push_str(&format!("{SIG_PREFIX}{} {}\n", s.name, B64.encode(blob)));
        }
        out
    }

    /// Parses the wire form (splitting at the last blank line).
    pub fn parse(bytes: &[u8]) -> Result<SignedNote, NoteError> {
        let all = std::str::from_utf8(bytes).map_err(|_| NoteError::Malformed("not UTF-8"))?;
        if all.chars().any(|c| c < ' ' && c != '\n') {
            return Err(NoteError::Malformed("holds control characters"));
        }
        let split = all
            .rfind("\n\n")
            .ok_or(NoteError::Malformed("no blank line before the signatures"))?;
        let (text, sigs) = (&all[..split + 1], &all[split + 2..]);
        if sigs.is_empty() || !sigs.ends_with('\n') {
            return Err(NoteError::Malformed("no signature lines"));
        }
        let mut signatures = Vec::new();
        for line in sigs.lines() {
            let rest = line
                .strip_prefix(SIG_PREFIX)
                .ok_or(NoteError::Malformed("a signature line lacks the em dash"))?;
            let (name, blob) = rest
                .split_once(' ')
                .ok_or(NoteError::Malformed("a signature line lacks its signature"))?;
            if !valid_key_name(name) {
                return Err(NoteError::Malformed("a signature line has a bad key name"));
            }
            let blob = B64
                .decode(blob)
                .map_err(|_| NoteError::Malformed("a signature is not base64"))?;
            if blob.len() < 5 {
                return Err(NoteError::Malformed("a signature is too short"));
            }
            signatures.push(NoteSignature {
                name: name.to_owned(),
                id: [blob[0], blob[1], blob[2], blob[3]],
                signature: blob[4..].to_vec(),
            });
        }
        if signatures.len() > 100 {
            return Err(NoteError::Malformed("more than 100 signatures"));
        }
        Ok(SignedNote {
            text: text.to_owned(),
            signatures,
        })
    }
}

/// The text of one of chainship's own notes (a head, a redaction
/// statement), read in order: its format line, then `name value` lines, each
/// where it must be.
pub struct NoteBody<'a> {
    lines: std::str::Lines<'a>,
}

impl<'a> NoteBody<'a> {
    /// The body of `text`, whose first line must be `format_line`.
    pub fn new(text: &'a str, format_line: &str) -> Result<Self, Error> {
        let mut lines = text.lines();
        if lines.next() != Some(format_line) {
            return Err(chainship_chain::integrity!("the first line is not {format_line}"));
        }
        Ok(NoteBody { lines })
    }

    /// The value of the next line, which must be `name value`.
    pub fn field(&mut self, name: &str) -> Result<String, Error> {
        self.lines
            .next()
            .and_then(|l| l.strip_prefix(name))
            .and_then(|v| v.strip_prefix(' '))
            .map(str::to_owned)
            .ok_or_else(|| chainship_chain::integrity!("missing the {name} line"))
    }

    /// The next line as it is (optional lines, and the check that none is left).
    pub fn next_line(&mut self) -> Option<&'a str> {
        self.lines.next()
    }
}

/// A key trusted to sign heads: the C2SP verifier key form
/// `<name>+<hex key id>+<base64(0x01 || public key)>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifierKey {
    pub name: String,
    pub id: [u8; 4],
    pub key: VerifyingKey,
    /// A trusted key retired at a rotation: it vouches for heads up to this
    /// seq only, so a leaked old key cannot sign new ones (chainship's
    /// trust setting, not part of the C2SP key text).
    pub retired_after: Option<u64>,
    /// A key trusted for one origin only (`origin=ORIGIN`): in a keys file
    /// shared by several logs, one log's key cannot vouch for another's
    /// (chainship's trust setting, not part of the C2SP key text).
    pub only_origin: Option<String>,
    /// A key from a trust policy, which knows no key name: a signature line
    /// of any name counts when its key id is this key's under that name.
    pub any_name: bool,
}

impl VerifierKey {
    /// The verifier key of `key` under `name` (its key id computed).
    pub fn new(name: &str, key: VerifyingKey) -> Self {
        VerifierKey {
            name: name.to_owned(),
            id: key_id(name, key.as_bytes()),
            key,
            retired_after: None,
            only_origin: None,
            any_name: false,
        }
    }

    /// A policy's log key (`log <hex>`): trusted under whatever name a
    /// signature line gives it.
    pub fn any_name(key: VerifyingKey) -> Self {
        VerifierKey {
            any_name: true,
            ..VerifierKey::new("(policy log key)", key)
        }
    }

    /// The vkey text (`NAME+KEYID+BASE64`).
    pub fn to_text(&self) -> String {
        let mut blob = vec![ED25519];
        blob.extend_from_slice(self.key.as_bytes());
        format!("{}+{}+{}", self.name, hex::encode(self.id), B64.encode(blob))
    }

    /// Parses a verifier key; the id must match the name and key.
    pub fn parse(text: &str) -> Result<VerifierKey, Error> {
        let (name, id, key) = parse_vkey(text, ED25519, "verifier key")?;
        Ok(VerifierKey {
            name,
            id,
            key,
            retired_after: None,
            only_origin: None,
            any_name: false,
        })
    }

    /// Whether this key may vouch for a head (or checkpoint) of `origin` at `seq`.
    pub fn trusted_for(&self, origin: &str, seq: u64) -> bool {
        self.retired_after.is_none_or(|last| seq <= last) && self.only_origin.as_deref().is_none_or(|o| o == origin)
    }

    /// Checks this key's signature line(s) in a note: `None` when the note
    /// has no line for this key, else whether the (first) one verifies.
    pub fn check(&self, note: &SignedNote) -> Option<bool> {
        // Every line of this key must verify, wherever it stands: a good
        // line first must not hide a forged one after it.
        let mut lines = self.lines(note).peekable();
        lines.peek()?;
        // verify_strict also refuses malleable signatures.
        Some(lines.all(|line| {
            Signature::from_slice(&line.signature)
                .map(|sig| self.key.verify_strict(note.text.as_bytes(), &sig).is_ok())
                .unwrap_or(false)
        }))
    }

    /// The note's signature lines that claim to be this key's.
    fn lines<'n>(&self, note: &'n SignedNote) -> impl Iterator<Item = &'n NoteSignature> {
        note.signatures.iter().filter(move |s| match self.any_name {
            true => s.id == key_id(&s.name, self.key.as_bytes()),
            false => s.name == self.name && s.id == self.id,
        })
    }
}

/// What each of `keys` says of a note: [`VerifierKey::check`], in key order.
pub type KeyChecks = Vec<Option<bool>>;

/// [`VerifierKey::check`] of every key on every note, the signatures
/// verified in batches ([`crate::batch_verify`]): the same answers as
/// checking each alone, in a fraction of the time.
pub fn check_many(notes: &[&SignedNote], keys: &[VerifierKey]) -> Vec<KeyChecks> {
    if keys.is_empty() {
        return vec![Vec::new(); notes.len()];
    }
    let mut jobs = Vec::new();
    // For each (note, key): the range of `jobs` holding its lines.
    let mut spans = Vec::with_capacity(notes.len() * keys.len());
    for note in notes {
        for key in keys {
            let start = jobs.len();
            jobs.extend(key.lines(note).map(|line| crate::batch_verify::Job {
                key: &key.key,
                message: note.text.as_bytes(),
                signature: &line.signature,
            }));
            spans.push(start..jobs.len());
        }
    }
    let verdicts = crate::batch_verify::verify_all(&jobs);
    let judged: Vec<Option<bool>> = spans
        .into_iter()
        .map(|span| (!span.is_empty()).then(|| verdicts[span].iter().all(|ok| *ok)))
        .collect();
    judged.chunks(keys.len()).map(<[_]>::to_vec).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_private_key_or_a_bad_key_is_never_echoed() {
        let secret = "AWFco9pQk3R2b3Vtd2VyZXNlY3JldGtleWJ5dGVzMTIzNDU2Nzg5MDEy";
        for text in [
            format!("PRIVATE+KEY+t/o+2474b335+{secret}"),
            format!("t/o+zzzz+{secret}"),
            format!("t/o+2474b335+{secret}"),
            secret.to_owned(),
        ] {
            let e = parse_vkey(&text, 0x01, "verifier key").unwrap_err();
            assert!(!e.message.contains(secret), "{e}");
            assert!(!e.message.contains(&secret[..12]), "{e}");
        }
        let e = parse_vkey(&format!("PRIVATE+KEY+t/o+2474b335+{secret}"), 0x01, "verifier key").unwrap_err();
        assert!(e.message.contains("private signing key"), "{e}");
    }

    use super::*;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    #[test]
    fn sign_parse_verify_round_trip() {
        let k = key(7);
        let note = SignedNote::sign("hello\nworld\n", &[("example.com/log", &k)]);
        let wire = note.to_text();
        assert!(wire.starts_with("hello\nworld\n\n\u{2014} example.com/log "));
        let back = SignedNote::parse(wire.as_bytes()).unwrap();
        assert_eq!(back, note);
        let vk = VerifierKey::new("example.com/log", k.verifying_key());
        assert_eq!(vk.check(&back), Some(true));
        let parsed = VerifierKey::parse(&vk.to_text()).unwrap();
        assert_eq!(parsed, vk);
    }

    #[test]
    fn an_edited_text_fails_and_an_unknown_key_is_ignored() {
        let k = key(1);
        let wire = SignedNote::sign("seq 5\n", &[("a", &k)])
            .to_text()
            .replace("seq 5", "seq 6");
        let note = SignedNote::parse(wire.as_bytes()).unwrap();
        assert_eq!(VerifierKey::new("a", k.verifying_key()).check(&note), Some(false));
        assert_eq!(VerifierKey::new("b", key(2).verifying_key()).check(&note), None);
    }

    #[test]
    fn a_key_of_small_order_is_refused_with_its_reason() {
        for point in curve25519_dalek::constants::EIGHT_TORSION {
            let public = point.compress().to_bytes();
            let Ok(key) = VerifyingKey::from_bytes(&public) else {
                continue;
            };
            let text = VerifierKey::new("weak/key", key).to_text();
            let e = VerifierKey::parse(&text).unwrap_err();
            assert!(e.message.contains("small order"), "{e}");
        }
        assert!(VerifierKey::parse(&VerifierKey::new("a", key(3).verifying_key()).to_text()).is_ok());
    }

    #[test]
    fn refuses_malformed_notes_and_keys() {
        assert!(SignedNote::parse(b"no blank line\n").is_err());
        assert!(SignedNote::parse(b"text\n\n-- a AAAA\n").is_err());
        assert!(SignedNote::parse("text\n\n\u{2014} a !!\n".as_bytes()).is_err());
        let vk = VerifierKey::new("a", key(3).verifying_key()).to_text();
        let wrong_id = vk.replacen("+", "+0", 1).replacen("+0", "+", 1);
        assert!(VerifierKey::parse(&wrong_id.replace(&wrong_id[2..10], "00000000")).is_err());
        assert!(VerifierKey::parse("a+b").is_err());
    }

    /// `check_many` says of each (note, key) what `check` says: several
    /// keys, a policy key of any name, a key with two lines of which the
    /// second is forged, a note with no line for a key, no keys at all.
    #[test]
    fn check_many_agrees_with_check_for_every_note_and_key() {
        let (a, b) = (key(1), key(2));
        let keys = [
            VerifierKey::new("a", a.verifying_key()),
            VerifierKey::new("b", b.verifying_key()),
            VerifierKey::any_name(a.verifying_key()),
        ];
        let forged_second = {
            let good = SignedNote::sign("seq 9\n", &[("a", &a)]).to_text();
            let other = SignedNote::sign("seq 10\n", &[("a", &a)]).to_text();
            let forged_line = other.lines().last().expect("a line").to_owned();
            format!("{good}{forged_line}\n")
        };
        let mut wires: Vec<String> = (0..40)
            .map(|i| {
                let signers: Vec<(&str, &SigningKey)> = match i % 3 {
                    0 => vec![("a", &a)],
                    1 => vec![("a", &a), ("b", &b)],
                    _ => vec![("c", &a)],
                };
                SignedNote::sign(&format!("seq {i}\n"), &signers).to_text()
            })
            .collect();
        wires[7] = wires[7].replace("seq 7", "seq 70");
        wires[20] = forged_second;
        let notes: Vec<SignedNote> = wires.iter().map(|w| SignedNote::parse(w.as_bytes()).unwrap()).collect();
        let refs: Vec<&SignedNote> = notes.iter().collect();
        let singly: Vec<KeyChecks> = notes
            .iter()
            .map(|n| keys.iter().map(|k| k.check(n)).collect())
            .collect();
        assert_eq!(check_many(&refs, &keys), singly);
        assert_eq!(singly[20][0], Some(false), "a forged second line");
        assert_eq!(singly[7][0], Some(false), "an edited text");
        assert_eq!(singly[2][2], Some(true), "a policy key under another name");
        assert_eq!(check_many(&refs, &[]), vec![KeyChecks::new(); notes.len()]);
    }
}
