//! Reading a secret from a file (a password, a bearer token): the one reader of
//! `--password-file` (dw-agent and dwctl), dwctl's Prometheus secret files and the password
//! files `dwctl auth` left behind.
//!
//! Its rules:
//! - the file is a regular file (after symlinks), of at most [`MAX_SECRET_BYTES`] bytes,
//!   UTF-8, and holds something once its line ending is dropped;
//! - the directory it is named in, and the one it really is in (symlinks resolved), may not
//!   be writable by group or others, unless sticky (`/tmp`-like) with the entry in it owned
//!   by root or by whoever runs the program: whoever can replace the file chooses the
//!   secret;
//! - trailing line endings (`\n`, `\r\n`, any number) are not part of the secret.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::error::Error;

/// The largest secret file read: 64 KiB (65,536 bytes). A password or a token is far
/// smaller; a larger file is the wrong file.
pub const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// Group- and other-write bits of a mode.
const WRITABLE_BY_OTHERS: u32 = 0o022;
/// The sticky bit: only an entry's owner (or the directory's, or root) may rename or
/// remove it.
const STICKY: u32 = 0o1000;

/// Reads the secret in `path`, named by `flag` in errors ([`Error::File`]), by the rules
/// of this module.
pub fn read_secret_file(flag: &'static str, path: &Path) -> Result<String, Error> {
    let shown = path.display();
    let refused = |why: String| Error::File {
        flag,
        message: format!("{flag} {shown}: {why}"),
    };
    let unreadable = |error: std::io::Error| Error::File {
        flag,
        message: format!("cannot read {flag} {shown}: {error}"),
    };
    let link = std::fs::symlink_metadata(path).map_err(unreadable)?;
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if !meta.is_file() {
        return Err(refused("not a regular file".into()));
    }
    check_directory(parent(path), link.uid()).map_err(&refused)?;
    let real = std::fs::canonicalize(path).map_err(unreadable)?;
    if parent(&real) != parent(path) {
        check_directory(parent(&real), meta.uid()).map_err(&refused)?;
    }
    let mut file = std::fs::File::open(&real).map_err(unreadable)?;
    if !file.metadata().map_err(unreadable)?.is_file() {
        return Err(refused("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.by_ref()
        .take(MAX_SECRET_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_SECRET_BYTES {
        return Err(refused(format!(
            "larger than {MAX_SECRET_BYTES} bytes, the most a secret file may hold"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| refused("not UTF-8".into()))?;
    let secret = text.trim_end_matches(['\r', '\n']);
    if secret.is_empty() {
        return Err(refused("empty".into()));
    }
    Ok(secret.to_owned())
}

/// The directory `path` is named in (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Refuses `dir` when others can replace its entry owned by `entry_uid`.
fn check_directory(dir: &Path, entry_uid: u32) -> Result<(), String> {
    let meta = std::fs::metadata(dir)
        .map_err(|error| format!("cannot read its directory {}: {error}", dir.display()))?;
    let mode = meta.mode() & 0o7777;
    if mode & WRITABLE_BY_OTHERS == 0 {
        return Ok(());
    }
    if mode & STICKY != 0 && (entry_uid == 0 || entry_uid == effective_uid()?) {
        return Ok(());
    }
    Err(format!(
        "its directory {} is writable by others (mode {mode:04o}), who could replace the \
         file: keep secrets in a directory only its owner can write",
        dir.display()
    ))
}

/// The effective uid of this process: the owner of `/proc/self`.
fn effective_uid() -> Result<u32, String> {
    std::fs::metadata("/proc/self")
        .map(|meta| meta.uid())
        .map_err(|error| format!("cannot tell who runs this program (/proc/self): {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn read(path: &Path) -> Result<String, String> {
        read_secret_file("--password-file", path).map_err(|error| error.to_string())
    }

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn line_endings_are_dropped_and_an_empty_secret_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        chmod(dir.path(), 0o700);
        let path = dir.path().join("password");
        for (text, secret) in [
            ("s3cret", "s3cret"),
            ("s3cret\n", "s3cret"),
            ("s3cret\r\n", "s3cret"),
            ("s3cret\n\n", "s3cret"),
            ("two words \n", "two words "),
            ("a\nb\n", "a\nb"),
        ] {
            std::fs::write(&path, text).unwrap();
            assert_eq!(read(&path).unwrap(), secret, "{text:?}");
        }
        for empty in ["", "\n", "\r\n"] {
            std::fs::write(&path, empty).unwrap();
            assert!(read(&path).unwrap_err().contains("empty"), "{empty:?}");
        }
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(read(&path).unwrap_err().contains("not UTF-8"));
        let missing = dir.path().join("missing");
        let error = read(&missing).unwrap_err();
        assert!(
            error.starts_with("cannot read --password-file") && error.contains("missing"),
            "{error}"
        );
        assert!(read(dir.path()).unwrap_err().contains("not a regular file"));
    }

    #[test]
    fn the_size_limit_is_checked_at_its_edge() {
        let dir = tempfile::tempdir().unwrap();
        chmod(dir.path(), 0o700);
        let path = dir.path().join("token");
        let limit = usize::try_from(MAX_SECRET_BYTES).unwrap();
        std::fs::write(&path, vec![b'a'; limit]).unwrap();
        assert_eq!(read(&path).unwrap().len(), limit);
        // The line ending counts: the file is what is bounded.
        std::fs::write(&path, [vec![b'a'; limit - 1], b"\n".to_vec()].concat()).unwrap();
        assert_eq!(read(&path).unwrap().len(), limit - 1);
        std::fs::write(&path, vec![b'a'; limit + 1]).unwrap();
        let error = read(&path).unwrap_err();
        assert!(error.contains("larger than 65536 bytes"), "{error}");
    }

    #[test]
    fn a_file_others_could_replace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("password");
        std::fs::write(&path, "s3cret\n").unwrap();
        chmod(dir.path(), 0o755);
        assert_eq!(read(&path).unwrap(), "s3cret");
        for shared in [0o775, 0o757, 0o777] {
            chmod(dir.path(), shared);
            let error = read(&path).unwrap_err();
            assert!(error.contains("writable by others"), "{shared:o}: {error}");
        }
        // Sticky (as /tmp): others cannot replace an entry of ours.
        chmod(dir.path(), 0o1777);
        assert_eq!(read(&path).unwrap(), "s3cret");

        // A link in a safe directory to a file in a shared one: the real directory counts.
        let safe = tempfile::tempdir().unwrap();
        chmod(safe.path(), 0o700);
        let link = safe.path().join("password");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        chmod(dir.path(), 0o777);
        assert!(read(&link).unwrap_err().contains("writable by others"));
        chmod(dir.path(), 0o700);
        assert_eq!(read(&link).unwrap(), "s3cret");
        // A link in a shared directory to a safe file: the link could be replaced.
        let shared_link = dir.path().join("link");
        std::os::unix::fs::symlink(safe.path().join("password"), &shared_link).unwrap();
        chmod(dir.path(), 0o777);
        assert!(
            read(&shared_link)
                .unwrap_err()
                .contains("writable by others")
        );
        chmod(dir.path(), 0o700);
    }
}
