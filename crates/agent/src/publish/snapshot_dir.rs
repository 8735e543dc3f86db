//! The snapshot's directory, which others may be able to write (docs/snapshot-trust.md):
//! nothing found there is trusted. Temp files get unpredictable names and are created
//! exclusively without following symlinks, then written, fsynced (mode 0644) and renamed
//! over the published name; the published file is read without following a symlink or
//! blocking on a FIFO, and only if the agent's user owns it; one agent per path holds an
//! exclusive `flock` on `.<name>.lock`.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use dw_routing::{Snapshot, SnapshotWriter};
use tracing::{info, warn};

use crate::error::Error;

/// The largest published file read back at start (a bigger one is replaced).
const MAX_PUBLISHED_BYTES: u64 = 1 << 30;

/// Temp file names: `.<name>.` and this many random characters.
pub(crate) const TEMP_RANDOM_CHARS: usize = 8;

/// Writes `snapshot` into a new file in `dir` and renames it over `path`; returns when
/// the rename completed.
pub(crate) fn write_atomically(
    dir: &Path,
    file_name: &str,
    path: &Path,
    writer: &mut SnapshotWriter,
    snapshot: &Snapshot,
) -> io::Result<Instant> {
    let (temp, file) = create_temp(dir, file_name)?;
    let written = write_synced(file, writer, snapshot).and_then(|()| fs::rename(&temp, path));
    if let Err(e) = written {
        // Best effort: the temp file is garbage now, and the published file is untouched.
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    let renamed_at = Instant::now();
    // The rename is what readers see; the directory fsync only makes it durable. A
    // failure here is logged, not treated as unpublished (that would publish twice).
    if let Err(e) = File::open(dir).and_then(|dir| dir.sync_all()) {
        warn!(dir = %dir.display(), error = %e, "fsync of the snapshot directory failed");
    }
    Ok(renamed_at)
}

/// Temp files are named `.<file>.` and eight random characters (older agents:
/// `.<file>.<pid>.<n>.tmp`). Holding the lock, this agent is the only one publishing
/// here, so any such file of its user is a leftover of a killed agent.
pub(crate) fn remove_stale_temp_files(dir: &Path, file_name: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let own_prefix = format!(".{file_name}.");
    // SAFETY: geteuid has no failure mode and no memory effects.
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(&own_prefix) else {
            continue;
        };
        let random =
            rest.len() == TEMP_RANDOM_CHARS && rest.bytes().all(|b| b.is_ascii_alphanumeric());
        let legacy = rest.strip_suffix(".tmp").is_some_and(|r| {
            r.split('.')
                .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        });
        if !random && !legacy {
            continue;
        }
        // Another user's file (a squatter in a shared directory) is left alone.
        match entry.metadata() {
            Ok(meta) if meta.uid() == me && !meta.is_dir() => {}
            _ => continue,
        }
        match fs::remove_file(entry.path()) {
            Ok(()) => info!(file = name, "removed a temp file left by a killed agent"),
            Err(e) => warn!(file = name, error = %e, "cannot remove a stale temp file"),
        }
    }
}

/// The published snapshot, if there is one this agent may honour: `Ok(None)` when
/// there is no file or it is unreadable as a snapshot, `Err(reason)` when something is
/// there that this agent's user did not write (a symlink, a FIFO, another owner).
pub(crate) fn read_published(path: &Path) -> Result<Option<Snapshot>, String> {
    let shown = path.display();
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            info!(snapshot = %shown, "no published snapshot yet");
            return Ok(None);
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err("it is a symbolic link (not followed)".into());
        }
        Err(e) => {
            warn!(snapshot = %shown, error = %e, "cannot read the published snapshot; it will be replaced");
            return Ok(None);
        }
    };
    let meta = file.metadata().map_err(|e| format!("fstat: {e}"))?;
    if !meta.file_type().is_file() {
        let kind = if meta.file_type().is_fifo() {
            "a FIFO"
        } else {
            "not a regular file"
        };
        return Err(format!("it is {kind}"));
    }
    // SAFETY: geteuid has no failure mode and no memory effects.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(format!(
            "it is owned by uid {}, not the agent's uid {me}",
            meta.uid()
        ));
    }
    if meta.len() > MAX_PUBLISHED_BYTES {
        return Err(format!(
            "it is {} bytes, too large to be a snapshot",
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    if let Err(e) = file.read_to_end(&mut bytes) {
        warn!(snapshot = %shown, error = %e, "cannot read the published snapshot; it will be replaced");
        return Ok(None);
    }
    match Snapshot::parse(&bytes) {
        Ok(snapshot) => {
            info!(
                snapshot = %shown,
                revision = snapshot.revision,
                keys = snapshot.kvs.len(),
                cluster_id = snapshot.cluster_id.as_deref().unwrap_or("-"),
                "found the last published snapshot"
            );
            Ok(Some(snapshot))
        }
        Err(e) => {
            warn!(snapshot = %shown, error = %e, "the published snapshot is unreadable; it will be replaced");
            Ok(None)
        }
    }
}

/// Checks that the directory exists and a file can be created in it.
pub(crate) fn probe(dir: &Path, file_name: &str) -> io::Result<()> {
    let metadata = fs::metadata(dir)?;
    if !metadata.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            "not a directory",
        ));
    }
    let (probe, file) = create_temp(dir, file_name)?;
    let result = file.sync_all();
    let _ = fs::remove_file(&probe);
    result
}

/// Takes the exclusive lock on `.<name>.lock` in the directory, for the agent's life: a
/// second agent publishing the same path would interleave revisions. The holder writes its
/// pid into the file, so the refused one can name it.
pub(crate) fn lock(dir: &Path, file_name: &str) -> Result<File, Error> {
    let path = dir.join(format!(".{file_name}.lock"));
    let failed = |source: io::Error| Error::SnapshotDir {
        dir: dir.to_path_buf(),
        source: io::Error::new(
            source.kind(),
            format!("cannot open the lock file {}: {source}", path.display()),
        ),
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&path)
        .map_err(failed)?;
    let meta = file.metadata().map_err(failed)?;
    if !meta.file_type().is_file() {
        return Err(failed(io::Error::other("not a regular file")));
    }
    // SAFETY: flock on an fd we own; no memory effects.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(failed(error));
        }
        let mut text = String::new();
        let holder = file
            .read_to_string(&mut text)
            .ok()
            .and_then(|_| text.trim().parse::<u32>().ok());
        return Err(Error::Locked { lock: path, holder });
    }
    // Ours now: record the pid (best effort; it only serves the message above).
    let _ = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .and_then(|()| file.flush());
    Ok(file)
}

/// Creates `.<name>.XXXXXXXX` in `dir` exclusively, without following a symlink: the name
/// is random (getrandom), and a name someone else took is skipped for another.
pub(crate) fn create_temp(dir: &Path, file_name: &str) -> io::Result<(PathBuf, File)> {
    const ALPHABET: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut last = None;
    for _ in 0..32 {
        let mut random = [0u8; TEMP_RANDOM_CHARS];
        getrandom(&mut random)?;
        let suffix: String = random
            .iter()
            .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
            .collect();
        let path = dir.join(format!(".{file_name}.{suffix}"));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temp file name")))
}

/// Fills `buffer` from the kernel's random source (getrandom(2)).
pub(crate) fn getrandom(buffer: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buffer.len() {
        let rest = &mut buffer[filled..];
        // SAFETY: the kernel writes at most `rest.len()` bytes into `rest`.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        filled += n as usize;
    }
    Ok(())
}

/// Writes `bytes` to `dir/file_name` as the snapshot is written: a temp file of an
/// unpredictable name (mode 0644, fsynced) renamed over it, then the directory fsynced.
pub(crate) fn write_small_file(dir: &Path, file_name: &str, bytes: &[u8]) -> io::Result<()> {
    remove_stale_temp_files(dir, file_name);
    let (temp, mut file) = create_temp(dir, file_name)?;
    let written = file
        .set_permissions(Permissions::from_mode(0o644))
        .and_then(|()| file.write_all(bytes))
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::rename(&temp, dir.join(file_name)));
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    File::open(dir).and_then(|dir| dir.sync_all())
}

/// Sets a freshly created temp file to mode 0644, writes `bytes` and fsyncs it.
/// Streams the snapshot into the file (no copy of the whole file in memory), then syncs.
fn write_synced(file: File, writer: &mut SnapshotWriter, snapshot: &Snapshot) -> io::Result<()> {
    // The umask may have narrowed the mode; readers run as another user.
    file.set_permissions(Permissions::from_mode(0o644))?;
    let mut buffered = io::BufWriter::with_capacity(256 * 1024, file);
    writer.write_json(snapshot, &mut buffered)?;
    let file = buffered
        .into_inner()
        .map_err(io::IntoInnerError::into_error)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_random_and_never_follow_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let mut names = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let (path, _file) = create_temp(dir.path(), "s.json").unwrap();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            let random = name.strip_prefix(".s.json.").unwrap();
            assert_eq!(random.len(), TEMP_RANDOM_CHARS);
            assert!(random.bytes().all(|b| b.is_ascii_alphanumeric()), "{name}");
            // Squat the name just used with a symlink: a later create must not follow it.
            fs::remove_file(&path).unwrap();
            std::os::unix::fs::symlink(&victim, &path).unwrap();
            assert!(names.insert(name));
        }
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
    }
}
