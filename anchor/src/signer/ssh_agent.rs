//! `--signing-key ssh-agent:PATH`: heads and checkpoints signed by an
//! Ed25519 key an ssh-agent holds (a YubiKey behind it, or any agent), so
//! the private key never sits on the follower's disk.
//!
//! PATH is the key's OpenSSH public key file (`ssh-ed25519 AAAA… comment`);
//! the note's key name is its comment unless one is given. The agent at
//! `$SSH_AUTH_SOCK` is asked over its protocol (draft-miller-ssh-agent):
//! `SSH_AGENTC_SIGN_REQUEST` with the key's blob and the note's text. For
//! an `ssh-ed25519` key the agent answers a pure Ed25519 signature of the
//! text itself, which is what a signed note carries: the notes are
//! byte-for-byte those a key file signs.
//!
//! Each signature is one connection: an agent restarted between heads is
//! simply reached again. A missing or refusing agent is a transient error
//! (the head waits and is retried; nothing is signed by another key).

use chainship_chain::{Error, Setting, permanent};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, VerifyingKey};

use crate::note::valid_key_name;
use crate::signer::Signer;
use crate::store::StoreError;

const SSH_AGENT_FAILURE: u8 = 5;
const SSH_AGENTC_REQUEST_IDENTITIES: u8 = 11;
const SSH_AGENT_IDENTITIES_ANSWER: u8 = 12;
const SSH_AGENTC_SIGN_REQUEST: u8 = 13;
const SSH_AGENT_SIGN_RESPONSE: u8 = 14;
const ED25519: &str = "ssh-ed25519";
/// An agent that does not answer within this long is treated as gone.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Answers larger than this are not an agent's.
const MAX_ANSWER: usize = 256 * 1024;

/// A key an ssh-agent holds.
pub struct AgentSigner {
    name: String,
    key: VerifyingKey,
    blob: Vec<u8>,
    socket: PathBuf,
    public_file: PathBuf,
}

impl AgentSigner {
    /// The key in the OpenSSH public key file `public_file`, signed with by
    /// the agent at `socket`; named `name`, or by the file's comment.
    pub fn open(public_file: &Path, name: Option<&str>, socket: Option<PathBuf>) -> Result<AgentSigner, Error> {
        let err = |why: String| permanent!("ssh-agent:{}: {why}", public_file.display());
        // A public key file is a line; anything much larger is not one.
        let text = crate::files::read_small(public_file, 64 * 1024).map_err(|e| err(e.message))?;
        let mut fields = text.split_whitespace();
        let (Some(kind), Some(encoded)) = (fields.next(), fields.next()) else {
            return Err(err(
                "not an OpenSSH public key (expected: ssh-ed25519 AAAA… comment)".into()
            ));
        };
        if kind != ED25519 {
            return Err(err(format!(
                "a {kind} key; signed notes need an Ed25519 key (ssh-keygen -t ed25519)"
            )));
        }
        let blob = B64.decode(encoded).map_err(|_| err("the key is not base64".into()))?;
        let key = parse_key_blob(&blob).ok_or_else(|| err("not an ssh-ed25519 key blob".into()))?;
        let comment: Vec<&str> = fields.collect();
        let name = match name {
            Some(n) => n.to_owned(),
            None if comment.len() == 1 => comment[0].to_owned(),
            None => {
                return Err(err(
                    "the key's comment is not one word usable as the note's key name; give it a name".into(),
                )
                .with_setting(Setting::SigningKeyName));
            }
        };
        if !valid_key_name(&name) {
            return Err(err(format!(
                "key name {name:?}: a key name must be non-empty, without spaces or '+'"
            ))
            .with_setting(Setting::SigningKeyName));
        }
        let socket = match socket.or_else(|| std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from)) {
            Some(s) if !s.as_os_str().is_empty() => s,
            _ => return Err(err("no agent: SSH_AUTH_SOCK is not set".into())),
        };
        let signer = AgentSigner {
            name,
            key,
            blob,
            socket,
            public_file: public_file.to_owned(),
        };
        // At start, a clear answer: is the agent there, and does it hold the key?
        if !signer.holds_key().map_err(|e| err(e.message))? {
            return Err(err(format!(
                "the agent at {} does not hold this key (ssh-add it)",
                signer.socket.display()
            )));
        }
        Ok(signer)
    }

    /// One request, one answer (its type byte first).
    fn ask(&self, request: &[u8]) -> Result<Vec<u8>, StoreError> {
        let fail = |why: String| StoreError::transient(format!("{}: {why}", self.describe()));
        let mut stream =
            UnixStream::connect(&self.socket).map_err(|e| fail(format!("cannot reach the agent ({e})")))?;
        stream
            .set_read_timeout(Some(TIMEOUT))
            .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
            .map_err(|e| fail(e.to_string()))?;
        let mut framed = (request.len() as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(request);
        stream
            .write_all(&framed)
            .map_err(|e| fail(format!("the agent went away ({e})")))?;
        let mut len = [0u8; 4];
        stream
            .read_exact(&mut len)
            .map_err(|e| fail(format!("no answer from the agent ({e})")))?;
        let len = u32::from_be_bytes(len) as usize;
        if len == 0 || len > MAX_ANSWER {
            return Err(fail(format!("an answer of {len} bytes is not an agent's")));
        }
        let mut answer = vec![0u8; len];
        stream
            .read_exact(&mut answer)
            .map_err(|e| fail(format!("a cut answer from the agent ({e})")))?;
        Ok(answer)
    }

    /// Whether the agent lists this key.
    fn holds_key(&self) -> Result<bool, StoreError> {
        let answer = self.ask(&[SSH_AGENTC_REQUEST_IDENTITIES])?;
        let mut r = Reader(&answer);
        if r.byte() != Some(SSH_AGENT_IDENTITIES_ANSWER) {
            return Err(StoreError::transient(format!(
                "{}: the agent did not list its keys",
                self.describe()
            )));
        }
        let count = r.u32().unwrap_or(0);
        for _ in 0..count {
            let (Some(blob), Some(_comment)) = (r.string(), r.string()) else {
                break;
            };
            if blob == self.blob {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl Signer for AgentSigner {
    fn name(&self) -> &str {
        &self.name
    }

    fn public_key(&self) -> VerifyingKey {
        self.key
    }

    fn sign(&self, message: &[u8]) -> Result<Signature, StoreError> {
        let mut request = vec![SSH_AGENTC_SIGN_REQUEST];
        put_string(&mut request, &self.blob);
        put_string(&mut request, message);
        request.extend_from_slice(&0u32.to_be_bytes());
        let answer = self.ask(&request)?;
        let refused = |why: &str| StoreError::transient(format!("{}: {why}", self.describe()));
        let mut r = Reader(&answer);
        match r.byte() {
            Some(SSH_AGENT_SIGN_RESPONSE) => {}
            Some(SSH_AGENT_FAILURE) => {
                return Err(refused(
                    "the agent refused to sign (key removed, locked, or confirmation denied)",
                ));
            }
            _ => return Err(refused("an answer that is not a signature")),
        }
        let signature = r.string().ok_or_else(|| refused("a cut signature"))?;
        let mut s = Reader(signature);
        match (s.string(), s.string()) {
            (Some(kind), Some(bytes)) if kind == ED25519.as_bytes() && bytes.len() == 64 => {
                let bytes: [u8; 64] = bytes.try_into().expect("64 bytes");
                Ok(Signature::from_bytes(&bytes))
            }
            _ => Err(refused("not an ssh-ed25519 signature")),
        }
    }

    fn describe(&self) -> String {
        format!(
            "ssh-agent key {} (agent at {})",
            self.public_file.display(),
            self.socket.display()
        )
    }
}

/// The public key in an `ssh-ed25519` key blob.
fn parse_key_blob(blob: &[u8]) -> Option<VerifyingKey> {
    let mut r = Reader(blob);
    let kind = r.string()?;
    let key = r.string()?;
    if kind != ED25519.as_bytes() || !r.0.is_empty() {
        return None;
    }
    VerifyingKey::from_bytes(key.try_into().ok()?).ok()
}

fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// The agent protocol's wire types, read from the front.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*first)
    }

    fn u32(&mut self) -> Option<u32> {
        let (head, rest) = self.0.split_at_checked(4)?;
        self.0 = rest;
        Some(u32::from_be_bytes(head.try_into().ok()?))
    }

    fn string(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        let (head, rest) = self.0.split_at_checked(len)?;
        self.0 = rest;
        Some(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_blobs_and_wire_strings_are_read_strictly() {
        let key = crate::signer::SignerKey::generate("k").unwrap();
        let mut blob = Vec::new();
        put_string(&mut blob, ED25519.as_bytes());
        put_string(&mut blob, key.key.verifying_key().as_bytes());
        assert_eq!(parse_key_blob(&blob), Some(key.key.verifying_key()));
        let mut longer = blob.clone();
        longer.push(0);
        assert_eq!(parse_key_blob(&longer), None);
        assert_eq!(parse_key_blob(&blob[..blob.len() - 1]), None);
        // A length past the end is no string, never a panic.
        assert_eq!(Reader(&[0, 0, 0, 9, 1]).string(), None);
    }

    #[test]
    fn a_missing_agent_or_another_key_type_is_a_one_line_error() {
        let dir = tempfile::TempDir::new().unwrap();
        let rsa = dir.path().join("rsa.pub");
        std::fs::write(&rsa, "ssh-rsa AAAAB3NzaC1yc2E= me@host\n").unwrap();
        let e = AgentSigner::open(&rsa, None, Some(dir.path().join("sock")))
            .err()
            .unwrap();
        assert!(
            e.message.contains("ssh-rsa key") && e.message.contains("rsa.pub"),
            "{e}"
        );
        let key = crate::signer::SignerKey::generate("k").unwrap();
        let mut blob = Vec::new();
        put_string(&mut blob, ED25519.as_bytes());
        put_string(&mut blob, key.key.verifying_key().as_bytes());
        let ed = dir.path().join("ed.pub");
        std::fs::write(&ed, format!("ssh-ed25519 {} prod/heads\n", B64.encode(&blob))).unwrap();
        let e = AgentSigner::open(&ed, None, Some(dir.path().join("sock")))
            .err()
            .unwrap();
        assert!(e.message.contains("cannot reach the agent"), "{e}");
    }
}
