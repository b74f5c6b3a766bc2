//! Signing keys on disk: `chainship keygen` writes one, the follower loads it.
//!
//! The file holds one line in the Go `note` package's private key form,
//! `PRIVATE+KEY+<name>+<hex key id>+<base64(0x01 || 32-byte seed)>`. It is
//! created with mode 0600 and never overwritten; a key file that group or
//! others can read is refused.

use chainship_chain::{Error, permanent};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::SigningKey;

use crate::note::{ED25519, VerifierKey, key_id, valid_key_name};
use crate::signer::Signer;
use crate::store::StoreError;

/// A key file's key, signing in this process.
struct FileSigner {
    name: String,
    key: SigningKey,
    path: Option<String>,
}

impl Signer for FileSigner {
    fn name(&self) -> &str {
        &self.name
    }

    fn public_key(&self) -> ed25519_dalek::VerifyingKey {
        self.key.verifying_key()
    }

    fn sign(&self, message: &[u8]) -> Result<ed25519_dalek::Signature, StoreError> {
        use ed25519_dalek::Signer as _;
        Ok(self.key.sign(message))
    }

    fn describe(&self) -> String {
        match &self.path {
            Some(path) => format!("the key file {path}"),
            None => format!("key {:?} in memory", self.name),
        }
    }
}

/// A named Ed25519 signing key.
pub struct SignerKey {
    pub name: String,
    pub key: SigningKey,
}

impl std::fmt::Debug for SignerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SignerKey({}, secret hidden)", self.name)
    }
}

impl SignerKey {
    /// A fresh key from the operating system's randomness.
    pub fn generate(name: &str) -> Result<SignerKey, Error> {
        if !valid_key_name(name) {
            return Err(permanent!(
                "key name {name:?}: a key name must be non-empty, without spaces or '+'"
            ));
        }
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| permanent!("no randomness for a key: {e}"))?;
        Ok(SignerKey {
            name: name.to_owned(),
            key: SigningKey::from_bytes(&seed),
        })
    }

    pub fn verifier(&self) -> VerifierKey {
        VerifierKey::new(&self.name, self.key.verifying_key())
    }

    /// The key as a [`Signer`] to hand to the publishers.
    pub fn shared(&self) -> Arc<dyn Signer> {
        Arc::new(FileSigner {
            name: self.name.clone(),
            key: self.key.clone(),
            path: None,
        })
    }

    /// Loads a key file as a [`Signer`].
    pub fn load_signer(path: &Path) -> Result<Arc<dyn Signer>, Error> {
        let key = SignerKey::load(path)?;
        Ok(Arc::new(FileSigner {
            name: key.name,
            key: key.key,
            path: Some(path.display().to_string()),
        }))
    }

    fn to_text(&self) -> String {
        let mut blob = vec![ED25519];
        blob.extend_from_slice(self.key.as_bytes());
        let id = key_id(&self.name, self.key.verifying_key().as_bytes());
        format!("PRIVATE+KEY+{}+{}+{}\n", self.name, hex::encode(id), B64.encode(blob))
    }

    /// Writes the key to a new file (mode 0600); refuses to overwrite.
    pub fn write_new(&self, path: &Path) -> Result<(), Error> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| permanent!("{}: {}", path.display(), chainship_chain::access::explain(path, &e)))?;
        file.write_all(self.to_text().as_bytes())
            .and_then(|_| file.sync_all())
            .map_err(|e| permanent!("{}: {e}", path.display()))
    }

    /// Loads a key file, refusing one that anybody but its owner and this
    /// process can read (see [`readable_by_others`]).
    pub fn load(path: &Path) -> Result<SignerKey, Error> {
        let err = |why: String| permanent!("{}: {why}", path.display());
        let meta = std::fs::metadata(path).map_err(|e| err(chainship_chain::access::explain(path, &e)))?;
        if let Some((who, fix)) = readable_by_others(path, &meta) {
            return Err(err(format!("{who} can read it; {fix}")));
        }
        let text = read_small(path, 64 * 1024).map_err(|e| err(e.message))?;
        let rest = text
            .trim()
            .strip_prefix("PRIVATE+KEY+")
            .ok_or_else(|| err("not a chainship signing key".into()))?;
        let mut parts = rest.splitn(3, '+');
        let (Some(name), Some(id), Some(blob)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(err("malformed key".into()));
        };
        let blob = B64.decode(blob).map_err(|_| err("malformed key".into()))?;
        if blob.len() != 33 || blob[0] != ED25519 || !valid_key_name(name) {
            return Err(err("malformed key".into()));
        }
        let seed: [u8; 32] = blob[1..].try_into().expect("32 bytes");
        let key = SignerKey {
            name: name.to_owned(),
            key: SigningKey::from_bytes(&seed),
        };
        if hex::encode(key_id(name, key.key.verifying_key().as_bytes())) != id {
            return Err(err("key id does not match the key".into()));
        }
        Ok(key)
    }
}

/// Reads a small text file (a key, a PIN, a policy), refusing one larger
/// than `limit` bytes (`/dev/zero` must not take the memory) or not UTF-8.
///
/// Only a regular file (through symbolic links, as Kubernetes mounts
/// secrets): opened without blocking and refused at once when it is a FIFO,
/// a socket or a device, since a FIFO nobody writes would hold the process
/// in `open()` past every stop signal.
pub fn read_small(path: &Path, limit: u64) -> Result<String, Error> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| permanent!("{}", chainship_chain::access::explain(path, &e)))?;
    let kind = file.metadata().map_err(|e| permanent!("{e}"))?.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_dir() {
            "a directory"
        } else {
            "a device"
        };
        return Err(permanent!(
            "{what}, not a regular file: a key, PIN or policy source must be a file"
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| permanent!("{e}"))?;
    if bytes.len() as u64 > limit {
        return Err(permanent!("larger than {limit} bytes: not a key, PIN or policy file"));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|b| **b == b'\n').count() + 1;
        permanent!("line {line}: not UTF-8")
    })
}

/// Who besides this process's user (and root) can read a key file, or `None`.
///
/// Judged by what the kernel would allow, not by the mode bits alone:
/// - its owner, when that is another user;
/// - a second hard link: a name elsewhere, with other directories around it;
/// - a file in systemd's `$CREDENTIALS_DIRECTORY`, a directory nobody else
///   may enter (mode and ACL), is private whatever the file's own mode
///   (systemd hands credentials over as 0440 with an ACL for the unit's user);
/// - with a POSIX ACL, each entry that grants read (through the mask) is
///   someone else, except a named entry for this process's own user;
/// - without one, group and other read bits are.
///
/// With it, what fixes it: the advice fits the reason (a file already 0600
/// but owned by another user needs a `chown`, not a `chmod`).
fn readable_by_others(path: &Path, meta: &std::fs::Metadata) -> Option<(String, String)> {
    use chainship_chain::access::{named, user_name};
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me && meta.uid() != 0 {
        return Some((
            format!("user {} (its owner)", named(meta.uid(), user_name)),
            format!(
                "chown it to user {} (who runs chainship), mode 600",
                named(me, user_name)
            ),
        ));
    }
    if meta.nlink() > 1 {
        return Some((
            format!("whoever reaches its other {} hard link(s)", meta.nlink() - 1),
            "keep one name (remove the other links)".to_owned(),
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 == 0 {
        return None;
    }
    if in_private_credentials_dir(path) {
        return None;
    }
    match posix_acl(path) {
        Some(entries) => acl_readers(&entries, meta.uid(), ACL_READ).map(|who| {
            let fix = "remove the ACL entries that grant read (setfacl -b), or chmod 600 it (which masks them)";
            (who, fix.to_owned())
        }),
        None => Some((format!("group or others (mode {mode:o})"), "chmod 600 it".to_owned())),
    }
}

fn in_private_credentials_dir(path: &Path) -> bool {
    let Some(dir) = std::env::var_os("CREDENTIALS_DIRECTORY") else {
        return false;
    };
    let (Ok(dir), Some(Ok(parent))) = (
        std::fs::canonicalize(dir),
        std::fs::canonicalize(path)
            .ok()
            .map(|p| p.parent().map(Path::to_path_buf).ok_or(())),
    ) else {
        return false;
    };
    if dir != parent {
        return false;
    }
    // Nobody but its owner (root or this user) and ACL entries for this user may enter it.
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    let me = unsafe { libc::geteuid() };
    let Ok(meta) = std::fs::metadata(&dir) else {
        return false;
    };
    if meta.uid() != me && meta.uid() != 0 {
        return false;
    }
    match posix_acl(&dir) {
        Some(entries) => acl_readers(&entries, meta.uid(), ACL_EXECUTE).is_none(),
        None => meta.permissions().mode() & 0o011 == 0,
    }
}

const ACL_READ: u16 = 0x04;
const ACL_EXECUTE: u16 = 0x01;

/// The entries of a file's access ACL (`system.posix_acl_access`: a 4-byte
/// version, then 8-byte entries of tag, permissions and id), if it has one.
fn posix_acl(path: &Path) -> Option<Vec<(u16, u16, u32)>> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut buf = [0u8; 4096];
    // SAFETY: getxattr(2) writes at most buf.len() bytes into buf; both strings are NUL-terminated.
    let n = unsafe {
        libc::getxattr(
            c_path.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 4 {
        return None;
    }
    let entries = buf[4..n as usize]
        .chunks_exact(8)
        .map(|e| {
            (
                u16::from_le_bytes([e[0], e[1]]),
                u16::from_le_bytes([e[2], e[3]]),
                u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            )
        })
        .collect();
    Some(entries)
}

/// Who an ACL grants `permission` (read a file, enter a directory) on an
/// object owned by `owner`, besides the owner and this process's user.
fn acl_readers(entries: &[(u16, u16, u32)], owner: u32, permission: u16) -> Option<String> {
    use chainship_chain::access;
    const USER: u16 = 0x02;
    const GROUP_OBJ: u16 = 0x04;
    const GROUP: u16 = 0x08;
    const MASK: u16 = 0x10;
    const OTHER: u16 = 0x20;
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    let me = unsafe { libc::geteuid() };
    let mask = entries.iter().find(|e| e.0 == MASK).map_or(0x07, |e| e.1);
    let mut readers = Vec::new();
    for &(tag, perm, id) in entries {
        let granted = match tag {
            OTHER => perm & permission != 0,
            USER | GROUP_OBJ | GROUP => perm & mask & permission != 0,
            _ => false,
        };
        match tag {
            _ if !granted => {}
            USER if id == owner || id == me => {}
            USER => readers.push(format!("user {} (ACL)", access::named(id, access::user_name))),
            GROUP_OBJ => readers.push("its group".to_owned()),
            GROUP => readers.push(format!("group {} (ACL)", access::named(id, access::group_name))),
            _ => readers.push("others".to_owned()),
        }
    }
    (!readers.is_empty()).then(|| readers.join(", "))
}

/// The largest file of keys read (a fleet's trusted keys, a line an origin).
pub const KEY_LIST_LIMIT: u64 = 64 << 20;

/// Reads trusted verifier keys: each argument is a key, or a file of keys
/// (one a line, `#` comments allowed). A key may be followed by
/// ` until=SEQ`: retired at a rotation, it is trusted for heads up to SEQ
/// only (see the README, "Rotating the signing key").
pub fn load_trusted(args: &[String]) -> Result<Vec<VerifierKey>, Error> {
    let mut keys = Vec::new();
    for arg in args {
        if arg.contains('+') && !Path::new(arg).exists() {
            keys.push(parse_trusted(arg)?);
            continue;
        }
        let text = read_small(Path::new(arg), KEY_LIST_LIMIT).map_err(|e| permanent!("{arg}: {e}"))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            keys.push(parse_trusted(line).map_err(|e| permanent!("{arg} line {}: {e}", n + 1))?);
        }
    }
    if keys.is_empty() {
        return Err(permanent!("at least one trusted key is needed"));
    }
    Ok(keys)
}

/// `KEY`, then optionally `until=SEQ` and `origin=ORIGIN`.
fn parse_trusted(text: &str) -> Result<VerifierKey, Error> {
    let mut words = text.split_whitespace();
    let mut key = VerifierKey::parse(words.next().unwrap_or_default())?;
    for word in words {
        if let Some(seq) = word.strip_prefix("until=") {
            if key.retired_after.is_some() {
                return Err(permanent!("{word:?}: a key is retired once (one until=SEQ)"));
            }
            let seq = seq
                .parse::<u64>()
                .map_err(|_| permanent!("{word:?}: until=SEQ takes the last seq the key vouches for"))?;
            key.retired_after = Some(seq);
        } else if let Some(origin) = word.strip_prefix("origin=") {
            if key.only_origin.is_some() || origin.is_empty() {
                return Err(permanent!("{word:?}: one origin=ORIGIN a key"));
            }
            key.only_origin = Some(origin.to_owned());
        } else {
            return Err(permanent!(
                "{word:?}: after a key only until=SEQ (the last seq it vouches for) and origin=ORIGIN (the one log it vouches for) may follow"
            ));
        }
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_acl_names_every_reader_but_the_owner_and_this_user() {
        use super::acl_readers;
        // SAFETY: geteuid(2) takes nothing and cannot fail.
        let me = unsafe { libc::geteuid() };
        let (user_obj, user, group_obj, group, mask, other) = (0x01, 0x02, 0x04, 0x08, 0x10, 0x20);
        // systemd's credential: root-owned 0440, an entry for the unit's user, nothing else reads.
        let credential = [
            (user_obj, 4, 0),
            (user, 4, me),
            (group_obj, 0, 0),
            (mask, 4, 0),
            (other, 0, 0),
        ];
        assert_eq!(acl_readers(&credential, 0, 4), None);
        // The group, another user, a named group, others: each named.
        let open = [
            (user_obj, 6, 0),
            (user, 4, me.wrapping_add(1)),
            (group_obj, 4, 0),
            (group, 4, 77),
            (mask, 4, 0),
            (other, 4, 0),
        ];
        let who = acl_readers(&open, 0, 4).unwrap();
        for part in ["its group", "group 77", "others", "(ACL)"] {
            assert!(who.contains(part), "{who}");
        }
        // A mask without read silences the group and named entries.
        let masked = [
            (user_obj, 6, 0),
            (group_obj, 4, 0),
            (group, 4, 77),
            (mask, 0, 0),
            (other, 0, 0),
        ];
        assert_eq!(acl_readers(&masked, 0, 4), None);
    }
    use super::*;

    #[test]
    fn keygen_writes_0600_never_overwrites_and_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let key = SignerKey::generate("prod-eu1/chainship").unwrap();
        key.write_new(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(key.write_new(&path).is_err(), "must not overwrite");
        let back = SignerKey::load(&path).unwrap();
        assert_eq!(back.verifier(), key.verifier());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(SignerKey::load(&path).unwrap_err().message.contains("chmod 600"));
    }

    #[test]
    fn trusted_keys_from_arguments_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = SignerKey::generate("a").unwrap().verifier().to_text();
        let b = SignerKey::generate("b").unwrap().verifier().to_text();
        let file = dir.path().join("keys");
        std::fs::write(&file, format!("# old and new\n{a}\n\n{b}\n")).unwrap();
        assert_eq!(load_trusted(&[file.to_str().unwrap().into()]).unwrap().len(), 2);
        assert_eq!(load_trusted(std::slice::from_ref(&a)).unwrap()[0].name, "a");
        assert!(load_trusted(&[]).is_err());
        let retired = load_trusted(&[format!("{a} until=200")]).unwrap();
        assert_eq!(retired[0].retired_after, Some(200));
        assert!(retired[0].trusted_for("o", 200) && !retired[0].trusted_for("o", 201));
        let scoped = load_trusted(&[format!("{a} origin=prod/agentrt until=9")]).unwrap();
        assert!(scoped[0].trusted_for("prod/agentrt", 9));
        assert!(!scoped[0].trusted_for("evil/agentrt", 9) && !scoped[0].trusted_for("prod/agentrt", 10));
        assert!(load_trusted(&[format!("{a} origin=")]).is_err());
        std::fs::write(&file, format!("{a} until=7\n{b}\n")).unwrap();
        let both = load_trusted(&[file.to_str().unwrap().into()]).unwrap();
        assert_eq!((both[0].retired_after, both[1].retired_after), (Some(7), None));
        assert!(
            load_trusted(&[format!("{a} until=soon")])
                .unwrap_err()
                .message
                .contains("until=SEQ")
        );
    }
}
