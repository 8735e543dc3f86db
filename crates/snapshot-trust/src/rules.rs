//! The rules themselves, on facts already gathered (no I/O): what `walk` found on the way
//! to a file, and the file.

use std::path::PathBuf;

use crate::owner::TrustedOwner;

/// Something on the way to the snapshot, as `fstat` saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its path as reached (symlinks resolved up to it).
    pub path: PathBuf,
    /// Its owner.
    pub uid: u32,
    /// `st_mode` (type and permission bits).
    pub mode: u32,
}

/// One step of the walk: a directory, and the entry entered in it (a directory or a
/// symlink).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The directory the entry is in.
    pub directory: Node,
    /// The entry.
    pub next: Node,
}

/// The way from `/` to the file's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Way {
    /// Every step taken, from `/` down.
    pub steps: Vec<Step>,
    /// The directory the file is in.
    pub directory: Node,
}

const WRITABLE_BY_OTHERS: u32 = 0o022;
const STICKY: u32 = 0o1000;

fn permissions(mode: u32) -> u32 {
    mode & 0o7777
}

/// The trust rules (crate docs) for `file` found at the end of `way`: the reason it is
/// refused, in words: the file's mode, its directory's mode, the file's owner, the
/// directory's owner, then the directories above, from `/` down.
pub fn check(way: &Way, file: &Node, owner: &TrustedOwner) -> Result<(), String> {
    if let TrustedOwner::Unknown(message) = owner {
        return Err(message.clone());
    }
    let directory = &way.directory;
    if file.mode & WRITABLE_BY_OTHERS != 0 {
        return Err(format!(
            "writable by group or others (mode {:04o})",
            permissions(file.mode)
        ));
    }
    if directory.mode & WRITABLE_BY_OTHERS != 0 {
        let mode = permissions(directory.mode);
        if directory.mode & STICKY == 0 {
            return Err(format!(
                "its directory is writable by group or others (mode {mode:04o})"
            ));
        }
        // By default whoever wrote first would own the file: every file is refused.
        if *owner == TrustedOwner::Default {
            return Err(format!(
                "its directory is shared (sticky, writable by others, mode {mode:04o}) and \
                 no trusted owner is set (dw_router.trusted_owner, dw-agent --trusted-owner)"
            ));
        }
    }
    if !owner.trusts(file.uid, directory.uid) {
        return Err(format!(
            "owned by uid {}, not {}",
            file.uid,
            owner.whom(directory.uid)
        ));
    }
    if !owner.trusts(directory.uid, directory.uid) {
        return Err(format!(
            "its directory is owned by uid {}, not {}",
            directory.uid,
            owner.whom(directory.uid)
        ));
    }
    for step in &way.steps {
        check_step(step, directory.uid, owner)?;
    }
    Ok(())
}

/// An ancestor may not let anyone but root and the trusted owner replace what comes next.
fn check_step(step: &Step, directory_uid: u32, owner: &TrustedOwner) -> Result<(), String> {
    let (above, next) = (&step.directory, &step.next);
    if !owner.trusts(above.uid, directory_uid) {
        return Err(format!(
            "{} on the way to it is owned by uid {}, not {}",
            above.path.display(),
            above.uid,
            owner.whom(directory_uid)
        ));
    }
    if above.mode & WRITABLE_BY_OTHERS == 0 {
        return Ok(());
    }
    let mode = permissions(above.mode);
    if above.mode & STICKY == 0 {
        return Err(format!(
            "{} on the way to it is writable by group or others (mode {mode:04o})",
            above.path.display()
        ));
    }
    if owner.trusts_in_shared(next.uid) {
        return Ok(());
    }
    let whom = match owner {
        TrustedOwner::Uid(uid) => format!("root or the trusted owner {uid}"),
        _ => "root (no trusted owner is set)".into(),
    };
    Err(format!(
        "{} is shared (sticky, writable by others, mode {mode:04o}) and {} in it is owned by \
         uid {}, not {whom}",
        above.path.display(),
        next.path.display(),
        next.uid
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(path: &str, uid: u32, mode: u32) -> Node {
        Node {
            path: path.into(),
            uid,
            mode,
        }
    }

    /// `/`, then each (path, uid, mode) directory in turn; the last is the file's.
    fn way(directories: &[(&str, u32, u32)]) -> Way {
        let mut nodes = vec![node("/", 0, 0o40755)];
        nodes.extend(directories.iter().map(|(p, u, m)| node(p, *u, 0o40000 | m)));
        let steps = nodes
            .windows(2)
            .map(|pair| Step {
                directory: pair[0].clone(),
                next: pair[1].clone(),
            })
            .collect();
        Way {
            steps,
            directory: nodes
                .last()
                .cloned()
                .unwrap_or_else(|| node("/", 0, 0o40755)),
        }
    }

    fn file(uid: u32, mode: u32) -> Node {
        node("f", uid, 0o100000 | mode)
    }

    #[test]
    fn the_file_and_its_directory() {
        let default = TrustedOwner::Default;
        let agent = TrustedOwner::Uid(998);
        let run = way(&[("/run", 0, 0o755), ("/run/dw-router", 998, 0o755)]);
        // The agent's own directory, the agent's file; root's file anywhere private.
        assert_eq!(check(&run, &file(998, 0o644), &default), Ok(()));
        assert_eq!(check(&run, &file(0, 0o644), &default), Ok(()));
        assert_eq!(check(&run, &file(998, 0o644), &agent), Ok(()));
        let err =
            |way: &Way, file: Node, owner: &TrustedOwner| check(way, &file, owner).unwrap_err();
        assert_eq!(
            err(&run, file(1001, 0o644), &default),
            "owned by uid 1001, not root or the directory's owner 998"
        );
        assert!(err(&run, file(998, 0o664), &default).contains("mode 0664"));
        assert!(err(&run, file(998, 0o646), &agent).contains("writable by group"));
        // /dev/shm: only with a trusted owner, and only its files (or root's).
        let shm = way(&[("/dev", 0, 0o755), ("/dev/shm", 0, 0o1777)]);
        assert_eq!(check(&shm, &file(998, 0o644), &agent), Ok(()));
        assert_eq!(check(&shm, &file(0, 0o644), &agent), Ok(()));
        assert_eq!(
            err(&shm, file(1001, 0o644), &agent),
            "owned by uid 1001, not root or the trusted owner 998"
        );
        assert!(err(&shm, file(998, 0o644), &default).contains("no trusted owner is set"));
        // The file's directory: not group-writable, and owned by root or the trusted owner.
        let group = way(&[("/run", 0, 0o755), ("/run/dw-router", 998, 0o775)]);
        assert!(err(&group, file(998, 0o644), &agent).contains("directory is writable"));
        let others = way(&[("/srv", 0, 0o755), ("/srv/snap", 1001, 0o755)]);
        assert_eq!(
            err(&others, file(998, 0o644), &agent),
            "its directory is owned by uid 1001, not root or the trusted owner 998"
        );
        let unknown = TrustedOwner::Unknown("names no user".into());
        assert_eq!(err(&run, file(0, 0o644), &unknown), "names no user");
    }

    #[test]
    fn every_directory_above() {
        let default = TrustedOwner::Default;
        let agent = TrustedOwner::Uid(998);
        let err =
            |way: &Way, file: Node, owner: &TrustedOwner| check(way, &file, owner).unwrap_err();
        // An attacker pre-creates dw-router/ under /tmp: they own it, and it is refused.
        let planted = way(&[("/tmp", 0, 0o1777), ("/tmp/dw-router", 1001, 0o755)]);
        assert_eq!(
            err(&planted, file(1001, 0o644), &default),
            "/tmp is shared (sticky, writable by others, mode 1777) and /tmp/dw-router in it \
             is owned by uid 1001, not root (no trusted owner is set)"
        );
        assert!(err(&planted, file(1001, 0o644), &agent).contains("owned by uid 1001"));
        // The trusted owner's directory there is fine; root's too.
        let own = way(&[
            ("/dev", 0, 0o755),
            ("/dev/shm", 0, 0o1777),
            ("/dev/shm/dw", 998, 0o755),
        ]);
        assert_eq!(check(&own, &file(998, 0o644), &agent), Ok(()));
        assert!(err(&own, file(998, 0o644), &default).contains("not root (no trusted owner"));
        let roots = way(&[("/tmp", 0, 0o1777), ("/tmp/dw", 0, 0o755)]);
        assert_eq!(check(&roots, &file(0, 0o644), &default), Ok(()));
        // A group-writable ancestor (the agent's group), not sticky.
        let group = way(&[("/srv", 0, 0o775), ("/srv/dw", 998, 0o755)]);
        assert_eq!(
            err(&group, file(998, 0o644), &agent),
            "/srv on the way to it is writable by group or others (mode 0775)"
        );
        // An ancestor owned by someone else could swap what is below it.
        let home = way(&[
            ("/home", 0, 0o755),
            ("/home/bob", 1001, 0o755),
            ("/home/bob/dw", 998, 0o755),
        ]);
        assert_eq!(
            err(&home, file(998, 0o644), &agent),
            "/home/bob on the way to it is owned by uid 1001, not root or the trusted owner 998"
        );
        // By default the directory's owner is trusted above it too.
        let mine = way(&[
            ("/home", 0, 0o755),
            ("/home/dw", 998, 0o755),
            ("/home/dw/run", 998, 0o755),
        ]);
        assert_eq!(check(&mine, &file(998, 0o644), &default), Ok(()));
    }
}
