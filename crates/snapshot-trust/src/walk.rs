//! Gathering the facts: the walk from `/` to the file's directory, one directory at a time
//! relative to the previous one, and the file opened relative to the last.

use std::collections::VecDeque;
use std::ffi::{CString, OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use crate::error::Refused;
use crate::owner::TrustedOwner;
use crate::rules::{Node, Step, Way, check};

/// Symbolic links followed on the way to the directory, at most (the kernel's limit).
const MAX_LINKS: usize = 40;

/// Opens `path` for reading if it is a trusted regular file (crate docs). Never blocks,
/// never follows a symlink in the last component.
pub fn open(path: &Path, owner: &TrustedOwner) -> Result<(File, Metadata), Refused> {
    let shown = path.display();
    let Some(name) = path.file_name() else {
        return Err(Refused::new(format!(
            "refused {shown}: the path names no file"
        )));
    };
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let (directory_file, way) =
        walk(directory).map_err(|refused| in_words(refused, &shown.to_string()))?;
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    let file = open_at(&directory_file, name, flags).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => Refused::Missing,
        Some(libc::ELOOP) => {
            Refused::new(format!("refused {shown}: a symbolic link (not followed)"))
        }
        _ => Refused::new(format!("refused {shown}: open: {e}")),
    })?;
    let metadata = file
        .metadata()
        .map_err(|e| Refused::new(format!("refused {shown}: fstat: {e}")))?;
    let verdict = if metadata.file_type().is_file() {
        check(&way, &node(path.to_path_buf(), &metadata), owner)
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

/// What readers would say of a regular file of `file_uid`, mode 0644, in `directory`:
/// for a writer before its first file exists.
pub fn check_directory(
    directory: &Path,
    owner: &TrustedOwner,
    file_uid: u32,
) -> Result<(), Refused> {
    let shown = directory.display().to_string();
    let (_, way) = walk(directory).map_err(|refused| in_words(refused, &shown))?;
    let file = Node {
        path: directory.join("?"),
        uid: file_uid,
        mode: libc::S_IFREG | 0o644,
    };
    check(&way, &file, owner).map_err(|reason| {
        Refused::new(format!(
            "a file of uid {file_uid} in {shown} would be refused: {reason}"
        ))
    })
}

/// A walk's refusal, saying what it refused.
fn in_words(refused: Refused, shown: &str) -> Refused {
    match refused {
        Refused::Missing => Refused::Missing,
        Refused::Refused { message, metadata } => Refused::Refused {
            message: format!("refused {shown}: {message}"),
            metadata,
        },
    }
}

fn node(path: PathBuf, metadata: &Metadata) -> Node {
    Node {
        path,
        uid: metadata.uid(),
        mode: metadata.mode(),
    }
}

/// Walks from `/` to `directory` (made absolute against the working directory), opening
/// each component `O_PATH | O_NOFOLLOW` relative to the previous one; a symlink is read
/// and its target walked in turn, from where it sits. Returns the directory, opened, and
/// every step taken.
fn walk(directory: &Path) -> Result<(File, Way), Refused> {
    let absolute = if directory.is_absolute() {
        directory.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| Refused::new(format!("cannot read the working directory: {e}")))?
            .join(directory)
    };
    let mut pending: VecDeque<OsString> = components(&absolute).into();
    let root = open_path(None, OsStr::new("/"))?;
    let root_node = node(PathBuf::from("/"), &stat(&root, Path::new("/"))?);
    let mut stack: Vec<(File, Node)> = vec![(root, root_node)];
    let mut steps = Vec::new();
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            if stack.len() > 1 {
                stack.pop();
            }
            continue;
        }
        let Some((above, above_node)) = stack.last() else {
            break;
        };
        let path = above_node.path.join(&name);
        let entry = open_path(Some(above), &name)?;
        let metadata = stat(&entry, &path)?;
        let next = node(path.clone(), &metadata);
        steps.push(Step {
            directory: above_node.clone(),
            next: next.clone(),
        });
        if metadata.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err(Refused::new(format!(
                    "more than {MAX_LINKS} symbolic links on the way"
                )));
            }
            let target = read_link(above, &name).map_err(|e| {
                Refused::new(format!("cannot read the link {}: {e}", path.display()))
            })?;
            if target.is_absolute() {
                stack.truncate(1);
            }
            for component in components(&target).into_iter().rev() {
                pending.push_front(component);
            }
            continue;
        }
        if !metadata.is_dir() {
            return Err(Refused::new(format!(
                "{} on the way is not a directory",
                path.display()
            )));
        }
        stack.push((entry, next));
    }
    let Some((file, directory)) = stack.pop() else {
        return Err(Refused::new("the walk lost its way".into()));
    };
    Ok((file, Way { steps, directory }))
}

/// The names to walk: `.` and the root left out, `..` kept (resolved physically).
fn components(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn stat(file: &File, path: &Path) -> Result<Metadata, Refused> {
    file.metadata()
        .map_err(|e| Refused::new(format!("fstat of {}: {e}", path.display())))
}

/// `O_PATH | O_NOFOLLOW` open of `name` in `directory` (or of an absolute `name`).
fn open_path(directory: Option<&File>, name: &OsStr) -> Result<File, Refused> {
    let flags = libc::O_PATH | libc::O_NOFOLLOW;
    let opened = match directory {
        Some(directory) => open_at(directory, name, flags),
        None => open_raw(libc::AT_FDCWD, name, flags),
    };
    opened.map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => Refused::Missing,
        _ => Refused::new(format!("cannot open {}: {e}", name.display())),
    })
}

fn open_at(directory: &File, name: &OsStr, flags: libc::c_int) -> io::Result<File> {
    open_raw(directory.as_raw_fd(), name, flags)
}

/// `openat(2)` with O_CLOEXEC and `flags`.
fn open_raw(directory: libc::c_int, name: &OsStr, flags: libc::c_int) -> io::Result<File> {
    let name = c_name(name)?;
    // SAFETY: `name` is NUL-terminated; the directory fd, if any, is open for the call.
    let fd = unsafe { libc::openat(directory, name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

fn read_link(directory: &File, name: &OsStr) -> io::Result<PathBuf> {
    let name = c_name(name)?;
    let mut buffer = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: the kernel writes at most `buffer.len()` bytes into the buffer we own.
    let n = unsafe {
        libc::readlinkat(
            directory.as_raw_fd(),
            name.as_ptr(),
            buffer.as_mut_ptr().cast(),
            buffer.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buffer.truncate(n as usize);
    Ok(PathBuf::from(OsString::from_vec(buffer)))
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))
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

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, chown, symlink};

    use super::*;

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A private directory whose ancestors are root's and not shared (under the crate),
    /// or None when the tests do not run as root (the rules need chown to be tried).
    fn private_base() -> Option<tempfile::TempDir> {
        // SAFETY: geteuid has no failure mode.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root to chown");
            return None;
        }
        let base = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        chmod(base.path(), 0o755);
        Some(base)
    }

    fn write_file(path: &Path, uid: u32) {
        fs::write(path, b"{}").unwrap();
        chmod(path, 0o644);
        chown(path, Some(uid), None).unwrap();
    }

    fn refusal(path: &Path, owner: &TrustedOwner) -> String {
        match open(path, owner) {
            Ok(_) => "ok".into(),
            Err(refused) => refused.to_string(),
        }
    }

    #[test]
    fn a_directory_planted_in_a_sticky_one_is_refused() {
        let Some(base) = private_base() else { return };
        let shared = base.path().join("shm");
        fs::create_dir(&shared).unwrap();
        chmod(&shared, 0o1777);
        let planted = shared.join("dw-router");
        fs::create_dir(&planted).unwrap();
        chown(&planted, Some(1001), None).unwrap();
        let path = planted.join("routing.json");
        write_file(&path, 1001);
        let refused = refusal(&path, &TrustedOwner::Default);
        assert!(
            refused.contains(&format!(
                "{} is shared (sticky, writable by others, mode 1777) and {} in it is owned by uid 1001",
                shared.display(),
                planted.display()
            )),
            "{refused}"
        );
        assert!(refusal(&path, &TrustedOwner::Uid(65534)).contains("owned by uid 1001"));
        // The trusted owner's own directory there is taken.
        chown(&planted, Some(65534), None).unwrap();
        chown(&path, Some(65534), None).unwrap();
        assert_eq!(refusal(&path, &TrustedOwner::Uid(65534)), "ok");
        assert!(check_directory(&planted, &TrustedOwner::Uid(65534), 65534).is_ok());
        assert!(check_directory(&planted, &TrustedOwner::Default, 65534).is_err());
    }

    #[test]
    fn a_group_writable_ancestor_is_refused_and_symlinks_are_judged_where_they_lead() {
        let Some(base) = private_base() else { return };
        let group = base.path().join("group");
        let dir = group.join("dw");
        fs::create_dir_all(&dir).unwrap();
        chmod(&group, 0o775);
        chmod(&dir, 0o755);
        let path = dir.join("routing.json");
        write_file(&path, 0);
        let refused = refusal(&path, &TrustedOwner::Default);
        assert!(
            refused.contains(&format!(
                "{} on the way to it is writable by group or others (mode 0775)",
                group.display()
            )),
            "{refused}"
        );
        chmod(&group, 0o755);
        assert_eq!(refusal(&path, &TrustedOwner::Default), "ok");
        // A symlinked directory is followed, and what it leads to is judged.
        let link = base.path().join("link");
        symlink(&dir, &link).unwrap();
        assert_eq!(
            refusal(&link.join("routing.json"), &TrustedOwner::Default),
            "ok"
        );
        chmod(&group, 0o777);
        assert!(refusal(&link.join("routing.json"), &TrustedOwner::Default).contains("mode 0777"));
        chmod(&group, 0o755);
        // A relative link and `..` are resolved physically.
        let relative = base.path().join("rel");
        symlink("group/./dw/../dw", &relative).unwrap();
        assert_eq!(
            refusal(&relative.join("routing.json"), &TrustedOwner::Default),
            "ok"
        );
        // A missing directory is missing, not refused.
        assert!(matches!(
            open(
                &base.path().join("none/routing.json"),
                &TrustedOwner::Default
            ),
            Err(Refused::Missing)
        ));
        // The last component is never followed.
        let file_link = base.path().join("file-link");
        symlink(&path, &file_link).unwrap();
        assert!(refusal(&file_link, &TrustedOwner::Default).contains("a symbolic link"));
    }
}
