//! Reading the small files a signer and a verifier trust: keys, PINs,
//! policies, lists of trusted keys. Regular files only, bounded in size,
//! and a secret that someone else can read is named with who can.

use chainship_chain::{Error, permanent};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

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
pub(crate) fn readable_by_others(path: &Path, meta: &std::fs::Metadata) -> Option<(String, String)> {
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
}
