//! The node's PHP users (`--php-users`): whose answer counter files the agent reads, each
//! opened by its name (docs/traffic.md, "Trust"), and the per-user directories root makes
//! for them (`--prepare-dirs`).

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use dw_snapshot_trust::TrustedOwner;

/// The PHP users read when `--php-users` is not given: root (a php-fpm master runs MINIT
/// as root, so every pool of one master counts in root's file), `www-data` (Debian's
/// php-fpm pools and Apache) and `nobody` (OpenLiteSpeed's lsphp).
pub const DEFAULT_PHP_USERS: &str = "root,www-data,nobody";

/// The group given the per-user directories by `--prepare-dirs` when `--answers-group` is
/// not given: the agent's own (dw-agent.service's `Group=`).
pub const DEFAULT_ANSWERS_GROUP: &str = "dw-agent";

/// A PHP user as configured, and its uid (None when the name names no user here: its file
/// is reported missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhpUser {
    /// As given (a name or a numeric uid).
    pub name: String,
    /// Its uid, when it has one.
    pub uid: Option<u32>,
}

/// Reads `--php-users`: names or numeric uids, comma separated (names looked up through
/// NSS); one user given twice (by name and uid) counts once. At least one, at most
/// `dw_traffic::MAX_FILES`.
pub fn parse_php_users(setting: &str) -> Result<Vec<PhpUser>, String> {
    let mut users: Vec<PhpUser> = Vec::new();
    for name in setting
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
    {
        let uid = match TrustedOwner::parse(name) {
            TrustedOwner::Uid(uid) => Some(uid),
            _ => None,
        };
        let seen = users.iter().any(|user| match (user.uid, uid) {
            (Some(a), Some(b)) => a == b,
            _ => user.name == name,
        });
        if !seen {
            users.push(PhpUser {
                name: name.to_owned(),
                uid,
            });
        }
    }
    if users.is_empty() {
        return Err(
            "--php-users names no user (to read no counter file: --answers-dir off)".into(),
        );
    }
    if users.len() > dw_traffic::MAX_FILES {
        return Err(format!(
            "--php-users names {} users, at most {} (each file is read at each scrape)",
            users.len(),
            dw_traffic::MAX_FILES
        ));
    }
    Ok(users)
}

/// Opens the directory `path` without following a symlink, so that its owner and mode
/// are set on what was checked.
fn open_dir(path: &Path) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|error| format!("{}: {error}", path.display()))
}

/// Sets the owner and mode of the open directory `dir` (at `path`).
fn own(dir: &std::fs::File, path: &Path, uid: u32, gid: u32, mode: u32) -> Result<(), String> {
    std::os::unix::fs::fchown(dir, Some(uid), Some(gid))
        .and_then(|()| dir.set_permissions(std::fs::Permissions::from_mode(mode)))
        .map_err(|error| format!("{}: {error}", path.display()))
}

/// `dw-agent --prepare-dirs`, as root: makes `dir` (root's, 0755: only root creates
/// entries in it) and in it `<uid>/` for each PHP user with a uid (the user's, of `group`,
/// 2750: only the user creates its file there, set-group-id so the file is `group`'s too,
/// and the agent, in `group`, reads it). Idempotent; refuses a per-user entry that is not
/// a directory or that another user made (it could hold anything: remove it first).
/// Returns what it did, a line each.
pub fn prepare_dirs(dir: &Path, users: &[PhpUser], group: &str) -> Result<Vec<String>, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("--prepare-dirs makes directories for other users: run it as root".into());
    }
    let gid = dw_snapshot_trust::gid_of_group(group)
        .ok_or_else(|| format!("--answers-group {group:?} names no group"))?;
    let mut done = Vec::new();
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|error| format!("{}: {error}", dir.display()))?;
    }
    own(&open_dir(dir)?, dir, 0, 0, 0o755)?;
    done.push(format!("{} root:root 0755", dir.display()));
    for user in users {
        let Some(uid) = user.uid else {
            done.push(format!("{}: no such user here, skipped", user.name));
            continue;
        };
        let path = dw_traffic::user_dir(dir, uid);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if !meta.is_dir() => {
                return Err(format!(
                    "{}: not a directory: remove it and run again",
                    path.display()
                ));
            }
            Ok(meta) if meta.uid() != uid && meta.uid() != 0 => {
                return Err(format!(
                    "{}: made by uid {}, not by {} or root: remove it (rm -r) and run again",
                    path.display(),
                    meta.uid(),
                    user.name
                ));
            }
            Ok(_) => {}
            Err(_) => std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&path)
                .map_err(|error| format!("{}: {error}", path.display()))?,
        }
        own(&open_dir(&path)?, &path, uid, gid, 0o2750)?;
        done.push(format!(
            "{} {}:{group} 2750 (for {})",
            path.display(),
            uid,
            user.name
        ));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn php_users_parse_dedupe_and_are_bounded() {
        let users = parse_php_users(" root, 0 ,nobody,,no-such-user-dw").unwrap();
        assert_eq!(
            users,
            [
                PhpUser {
                    name: "root".into(),
                    uid: Some(0)
                },
                PhpUser {
                    name: "nobody".into(),
                    uid: Some(65534)
                },
                PhpUser {
                    name: "no-such-user-dw".into(),
                    uid: None
                },
            ]
        );
        assert!(
            parse_php_users(" , ")
                .unwrap_err()
                .contains("names no user")
        );
        let at_bound: Vec<String> = (1000..1000 + dw_traffic::MAX_FILES)
            .map(|u| u.to_string())
            .collect();
        assert_eq!(
            parse_php_users(&at_bound.join(",")).unwrap().len(),
            dw_traffic::MAX_FILES
        );
        let past: Vec<String> = (1000..1001 + dw_traffic::MAX_FILES)
            .map(|u| u.to_string())
            .collect();
        assert!(
            parse_php_users(&past.join(","))
                .unwrap_err()
                .contains("at most 64")
        );
    }

    /// As root (the devenv): the parent becomes root's 0755 (a 1777 one from before
    /// included), each user's directory the user's, 2750, of the group; a directory
    /// another user made first is refused.
    #[test]
    fn prepare_dirs_makes_per_user_directories_only_root_creates() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("answers");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let users = parse_php_users("0,33,no-such-user-dw").unwrap();
        let done = prepare_dirs(&dir, &users, "4242").unwrap();
        assert_eq!(done.len(), 4, "{done:?}");
        let meta = std::fs::metadata(&dir).unwrap();
        assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o755));
        let www = std::fs::metadata(dir.join("33")).unwrap();
        assert_eq!(
            (www.uid(), www.gid(), www.mode() & 0o7777),
            (33, 4242, 0o2750)
        );
        // Again: the same, nothing refused.
        prepare_dirs(&dir, &users, "4242").unwrap();
        // A per-user directory another user made (in the old 1777 parent): refused.
        std::os::unix::fs::chown(dir.join("33"), Some(1001), None).unwrap();
        let error = prepare_dirs(&dir, &users, "4242").unwrap_err();
        assert!(error.contains("made by uid 1001"), "{error}");
        assert!(
            prepare_dirs(&dir, &users, "no-such-group-dw")
                .unwrap_err()
                .contains("names no group")
        );
    }
}
