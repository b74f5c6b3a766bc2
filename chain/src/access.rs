//! Saying why a file cannot be opened, in the words an operator fixes it
//! with: "Permission denied" alone does not say that a container runs as
//! another gid than the volume's owner. [`explain`] adds who this process
//! is and who owns the file (or the directory that refuses entry), and
//! [`user_name`] turns a uid into a name where the system has one.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// `error` on `path`, with what the kernel judged by when it is a
/// permission error: the uid, gid and groups this process runs as, and the
/// owner and mode of the file, or of the first directory on its way this
/// process may not enter. Other errors are said as they are.
pub fn explain(path: &Path, error: &io::Error) -> String {
    if error.kind() == io::ErrorKind::NotFound
        && let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        return format!(
            "{error}: its directory {} does not exist (create it first)",
            parent.display()
        );
    }
    if error.kind() != io::ErrorKind::PermissionDenied {
        return error.to_string();
    }
    // A file not there yet is refused by its directory (no write there).
    let refusing = first_closed_dir(path).unwrap_or_else(|| match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() && std::fs::symlink_metadata(path).is_err() => parent,
        _ => path,
    });
    let owner = match std::fs::metadata(refusing) {
        Ok(m) => format!(
            "{} {} is owned by {}:{} mode {:04o}",
            if refusing == path { "it" } else { "its directory" },
            if refusing == path {
                String::new()
            } else {
                refusing.display().to_string()
            },
            named(m.uid(), user_name),
            named(m.gid(), group_name),
            m.mode() & 0o7777
        )
        .replace("  ", " "),
        Err(_) => "its owner cannot be read".to_owned(),
    };
    format!("{error}: this process runs as {}; {owner}", whoami())
}

/// `uid 10001 (chainship), gid 999 (chainship), groups 999`.
pub fn whoami() -> String {
    // SAFETY: these take nothing and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let groups = supplementary_groups()
        .iter()
        .map(|g| g.to_string())
        .collect::<Vec<_>>()
        .join(",");
    format!(
        "uid {}, gid {}, groups {}",
        named(uid, user_name),
        named(gid, group_name),
        if groups.is_empty() { "none".to_owned() } else { groups }
    )
}

/// `10001 (chainship)`, or the bare number when no name is known.
pub fn named(id: u32, lookup: fn(u32) -> Option<String>) -> String {
    match lookup(id) {
        Some(name) => format!("{id} ({name})"),
        None => id.to_string(),
    }
}

/// The user's name in `/etc/passwd`, if it has one.
pub fn user_name(uid: u32) -> Option<String> {
    name_in("/etc/passwd", uid)
}

/// The group's name in `/etc/group`, if it has one.
pub fn group_name(gid: u32) -> Option<String> {
    name_in("/etc/group", gid)
}

/// The name on the line of `file` whose third field is `id` (the passwd
/// and group formats). Read plainly: no NSS, but no C library state either.
fn name_in(file: &str, id: u32) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id_field = fields.nth(1)?;
        (id_field.parse::<u32>().ok()? == id).then(|| name.to_owned())
    })
}

fn supplementary_groups() -> Vec<u32> {
    // SAFETY: a zero-length call asks for the count; the second fills at most that many.
    unsafe {
        let n = libc::getgroups(0, std::ptr::null_mut());
        if n <= 0 {
            return Vec::new();
        }
        let mut groups = vec![0 as libc::gid_t; n as usize];
        let got = libc::getgroups(n, groups.as_mut_ptr());
        groups.truncate(got.max(0) as usize);
        groups
    }
}

/// The first directory from the root down to `path`'s parent that this
/// process may not search (execute), if any.
fn first_closed_dir(path: &Path) -> Option<&Path> {
    let mut dirs: Vec<&Path> = path.ancestors().skip(1).filter(|p| !p.as_os_str().is_empty()).collect();
    dirs.reverse();
    dirs.into_iter().find(|dir| {
        let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
            return false;
        };
        // SAFETY: a valid NUL-terminated path; access(2) only reads it.
        unsafe { libc::access(c.as_ptr(), libc::X_OK) != 0 }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_errors_are_said_as_they_are() {
        let e = io::Error::from(io::ErrorKind::NotFound);
        assert_eq!(explain(Path::new("/nowhere"), &e), e.to_string());
        let e = io::Error::from(io::ErrorKind::InvalidData);
        assert_eq!(explain(Path::new("/no/where"), &e), e.to_string());
    }

    #[test]
    fn a_missing_directory_is_named_as_the_parent() {
        let e = io::Error::from(io::ErrorKind::NotFound);
        let text = explain(Path::new("/no/such/dir/file"), &e);
        assert!(
            text.ends_with("its directory /no/such/dir does not exist (create it first)"),
            "{text}"
        );
    }

    #[test]
    fn a_permission_error_names_the_process_and_the_owner() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
        let e = io::Error::from_raw_os_error(libc::EACCES);
        let text = explain(&file, &e);
        // SAFETY: takes nothing.
        let uid = unsafe { libc::geteuid() };
        assert!(text.contains(&format!("this process runs as uid {uid}")), "{text}");
        assert!(text.contains("it is owned by") && text.contains("mode 0640"), "{text}");
    }

    #[test]
    fn names_come_from_the_passwd_and_group_files() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
        assert_eq!(group_name(0).as_deref(), Some("root"));
        assert_eq!(named(4_000_000_000, user_name), "4000000000");
    }
}
