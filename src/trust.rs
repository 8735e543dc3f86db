//! Opening the snapshot without trusting whoever put it there.
//!
//! The snapshot's directory may be shared (a `/dev/shm` left configured, a directory made
//! writable by mistake), so a file at the path is only read when it is what dw-agent
//! publishes: a regular file, reached without following a symlink, opened without blocking
//! (a FIFO there must not hang a worker), whose owner and directory are trusted
//! (docs/snapshot-trust.md):
//!
//! - neither the file nor its directory is writable by group or others, except that a
//!   sticky directory writable by others (`/dev/shm`) is accepted when
//!   `dw_router.trusted_owner` is set;
//! - the file is owned by root or, when `dw_router.trusted_owner` is set, by that user;
//!   otherwise by root or the directory's owner.
//!
//! The directory is opened first and the file opened relative to it, so the directory
//! checked is the one the file was found in.

use std::ffi::{CString, OsStr};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::sync::OnceLock;

/// What `dw_router.trusted_owner` says, resolved once (it is a SYSTEM setting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustedOwner {
    /// Not set: root or the directory's owner.
    Default,
    /// Root or this uid.
    Uid(u32),
    /// Set to a name that names no user: every file is refused, with this message.
    Unknown(String),
}

impl TrustedOwner {
    /// Reads a setting: empty, a numeric uid, or a user name.
    pub fn parse(setting: &str) -> TrustedOwner {
        let setting = setting.trim();
        if setting.is_empty() {
            return TrustedOwner::Default;
        }
        if let Ok(uid) = setting.parse::<u32>() {
            return TrustedOwner::Uid(uid);
        }
        match uid_of_user(setting) {
            Some(uid) => TrustedOwner::Uid(uid),
            None => {
                TrustedOwner::Unknown(format!("dw_router.trusted_owner {setting:?} names no user"))
            }
        }
    }

    /// As phpinfo shows it.
    pub fn describe(&self) -> String {
        match self {
            TrustedOwner::Default => "root or the directory's owner".into(),
            TrustedOwner::Uid(uid) => format!("root or uid {uid}"),
            TrustedOwner::Unknown(message) => format!("nobody ({message})"),
        }
    }
}

/// The process's setting, resolved on first use (never in MINIT: no NSS lookup before fork).
pub fn trusted_owner() -> &'static TrustedOwner {
    static OWNER: OnceLock<TrustedOwner> = OnceLock::new();
    OWNER.get_or_init(|| TrustedOwner::parse(&crate::ini::trusted_owner()))
}

fn uid_of_user(name: &str) -> Option<u32> {
    let name = CString::new(name).ok()?;
    let mut buffer = vec![0 as libc::c_char; 4096];
    loop {
        // SAFETY: plain C structs, zero is a valid bit pattern; getpwnam_r writes into the
        // buffer we own and points `found` at `entry` or sets it to null.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe {
            libc::getpwnam_r(
                name.as_ptr(),
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buffer.len() < 1 << 20 {
            buffer.resize(buffer.len() * 4, 0);
            continue;
        }
        return (rc == 0 && !found.is_null()).then_some(entry.pw_uid);
    }
}

/// Why a snapshot was not opened.
#[derive(Debug)]
pub enum Refused {
    /// Nothing at the path (or its directory): not a failed load.
    Missing,
    /// Something is there and it is not read. `metadata` is the opened object's, when it
    /// got that far (so a refused file is counted once per version).
    Refused {
        message: String,
        metadata: Option<Box<Metadata>>,
    },
}

fn refused(message: String) -> Refused {
    Refused::Refused {
        message,
        metadata: None,
    }
}

/// Opens `path` for reading if it is a trusted regular file. Never blocks, never follows a
/// symlink in the last component.
pub fn open(path: &Path, owner: &TrustedOwner) -> Result<(File, Metadata), Refused> {
    let shown = path.display();
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let Some(name) = path.file_name() else {
        return Err(refused(format!("refused {shown}: the path names no file")));
    };
    let directory_file = open_raw(None, directory.as_os_str(), libc::O_DIRECTORY).map_err(|e| {
        match e.raw_os_error() {
            Some(libc::ENOENT) => Refused::Missing,
            _ => refused(format!(
                "refused {shown}: cannot open its directory {}: {e}",
                directory.display()
            )),
        }
    })?;
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    let file =
        open_raw(Some(&directory_file), name, flags).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => Refused::Missing,
            Some(libc::ELOOP) => {
                refused(format!("refused {shown}: a symbolic link (not followed)"))
            }
            _ => refused(format!("open: {e}")),
        })?;
    let metadata = file
        .metadata()
        .map_err(|e| refused(format!("fstat: {e}")))?;
    let directory_metadata = directory_file
        .metadata()
        .map_err(|e| refused(format!("fstat of {}: {e}", directory.display())))?;
    let verdict = if metadata.file_type().is_file() {
        check(
            &Facts {
                uid: metadata.uid(),
                mode: metadata.mode(),
                directory_uid: directory_metadata.uid(),
                directory_mode: directory_metadata.mode(),
            },
            owner,
        )
    } else {
        Err(format!("not a regular file ({})", kind(&metadata)))
    };
    match verdict {
        Ok(()) => Ok((file, metadata)),
        Err(reason) => Err(Refused::Refused {
            message: format!("refused {shown}: {reason}"),
            metadata: Some(Box::new(metadata)),
        }),
    }
}

fn kind(metadata: &Metadata) -> &'static str {
    let kind = metadata.file_type();
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// `open(2)`/`openat(2)` with O_RDONLY | O_CLOEXEC and `flags`.
fn open_raw(directory: Option<&File>, name: &OsStr, flags: libc::c_int) -> io::Result<File> {
    let name = CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | flags;
    // SAFETY: `name` is NUL-terminated; the directory fd, if any, is open for the call.
    let fd = unsafe {
        match directory {
            Some(directory) => libc::openat(directory.as_raw_fd(), name.as_ptr(), flags),
            None => libc::open(name.as_ptr(), flags),
        }
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// What the rules look at.
#[derive(Debug, Clone, Copy)]
pub struct Facts {
    pub uid: u32,
    pub mode: u32,
    pub directory_uid: u32,
    pub directory_mode: u32,
}

const WRITABLE_BY_OTHERS: u32 = 0o022;
const STICKY: u32 = 0o1000;

/// The trust rules (module docs); the reason a file is refused, in words.
pub fn check(facts: &Facts, owner: &TrustedOwner) -> Result<(), String> {
    if let TrustedOwner::Unknown(message) = owner {
        return Err(message.clone());
    }
    if facts.mode & WRITABLE_BY_OTHERS != 0 {
        return Err(format!(
            "writable by group or others (mode {:04o})",
            facts.mode & 0o7777
        ));
    }
    if facts.directory_mode & WRITABLE_BY_OTHERS != 0 {
        let mode = facts.directory_mode & 0o7777;
        if facts.directory_mode & STICKY == 0 {
            return Err(format!(
                "its directory is writable by group or others (mode {mode:04o})"
            ));
        }
        if *owner == TrustedOwner::Default {
            return Err(format!(
                "its directory is shared (sticky, writable by others, mode {mode:04o}) and \
                 dw_router.trusted_owner is not set"
            ));
        }
    }
    match *owner {
        TrustedOwner::Uid(trusted) if facts.uid != 0 && facts.uid != trusted => Err(format!(
            "owned by uid {}, not root or dw_router.trusted_owner {trusted}",
            facts.uid
        )),
        TrustedOwner::Default if facts.uid != 0 && facts.uid != facts.directory_uid => {
            Err(format!(
                "owned by uid {}, not root or the directory's owner {}",
                facts.uid, facts.directory_uid
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(uid: u32, mode: u32, directory_uid: u32, directory_mode: u32) -> Facts {
        Facts {
            uid,
            mode,
            directory_uid,
            directory_mode,
        }
    }

    #[test]
    fn the_rules() {
        let default = TrustedOwner::Default;
        let agent = TrustedOwner::Uid(998);
        // The agent's own directory, the agent's file; root's file anywhere private.
        assert_eq!(check(&facts(998, 0o644, 998, 0o755), &default), Ok(()));
        assert_eq!(check(&facts(0, 0o644, 998, 0o755), &default), Ok(()));
        assert_eq!(check(&facts(998, 0o644, 0, 0o755), &agent), Ok(()));
        // /dev/shm: only with trusted_owner, and only its files (or root's).
        assert_eq!(check(&facts(998, 0o644, 0, 0o41777), &agent), Ok(()));
        assert_eq!(check(&facts(0, 0o644, 0, 0o41777), &agent), Ok(()));
        let err = |facts: Facts, owner: &TrustedOwner| check(&facts, owner).unwrap_err();
        assert_eq!(
            err(facts(1001, 0o644, 0, 0o755), &default),
            "owned by uid 1001, not root or the directory's owner 0"
        );
        assert_eq!(
            err(facts(1001, 0o644, 0, 0o41777), &agent),
            "owned by uid 1001, not root or dw_router.trusted_owner 998"
        );
        assert!(
            err(facts(998, 0o644, 998, 0o41777), &default).contains("trusted_owner is not set")
        );
        assert!(err(facts(998, 0o664, 998, 0o755), &default).contains("mode 0664"));
        assert!(err(facts(998, 0o646, 998, 0o755), &agent).contains("writable by group"));
        assert!(err(facts(998, 0o644, 998, 0o775), &agent).contains("directory is writable"));
        assert!(err(facts(998, 0o644, 998, 0o777), &agent).contains("mode 0777"));
        let unknown = TrustedOwner::Unknown("names no user".into());
        assert_eq!(err(facts(0, 0o644, 0, 0o755), &unknown), "names no user");
    }

    #[test]
    fn the_setting_parses() {
        assert_eq!(TrustedOwner::parse(""), TrustedOwner::Default);
        assert_eq!(TrustedOwner::parse(" 65534 "), TrustedOwner::Uid(65534));
        assert_eq!(TrustedOwner::parse("root"), TrustedOwner::Uid(0));
        assert!(matches!(
            TrustedOwner::parse("no-such-user-dw"),
            TrustedOwner::Unknown(_)
        ));
    }
}
