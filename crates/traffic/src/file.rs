//! The counter files on disk: the writer's mapping and locks (the extension), and the
//! reader's bounded read of the configured users' files (the agent).
//!
//! Each user that runs PHP has one file, `answers-<uid>.bin`: every process tree of that
//! user on the node (a php-fpm pool and its reload, an lsphp parent and the one a detached
//! restart starts beside it, several pools of one master) maps the same file, claims
//! slots in it and shares its label sets. Slots are exclusive by their locks whatever the
//! tree, so two live trees need nothing more.
//!
//! Where it lives ([`locate`]): in `<dir>/<uid>/` when that directory exists (a per-user
//! directory that root made, `dw-agent --prepare-dirs` or systemd-tmpfiles: owned by the
//! user or root, writable by no one else, so no other user can create or replace the
//! file; its group is the agent's, set-group-id, so the file is the agent's group too),
//! else directly in `<dir>` (the layout before per-user directories; in a directory other
//! users can write, one of them can create the file first, and the reader refuses it as
//! not the user's). The file is made `0640`: only its user and the agent's group read it.

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use crate::counters::Locks;
use crate::error::Error;
use crate::layout::{FILE_BYTES, FILE_WORDS, header, slot_offset};
use crate::reader::{Totals, parse};

/// The most counter files a reader reads: the most PHP users a node is configured with
/// ([`read_users`]; a longer list is refused where it is configured), and the most files
/// [`read_directory`] reads.
pub const MAX_FILES: usize = 64;

/// The most directory entries [`read_directory`] looks at in one read: a directory writable
/// by every PHP user (1777) can be filled with names by any local user; past this many the
/// rest are not looked at, and [`DirectoryTotals::unscanned`] says so. [`read_users`] scans
/// nothing.
pub const MAX_SCANNED_ENTRIES: usize = 4096;

/// The mode a writer gives its counter file: its user reads and writes, the agent's group
/// (the per-user directory's, inherited) reads, no one else opens it.
pub const FILE_MODE: u32 = 0o640;

/// The most refusals a read keeps with their reasons; [`DirectoryTotals::refused_more`]
/// counts the rest.
pub const MAX_REFUSALS_KEPT: usize = 16;

/// The file name a user's trees share.
pub fn file_name(uid: u32) -> String {
    format!("answers-{uid}.bin")
}

fn errno(what: &str) -> Error {
    Error::Io(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// The per-user directory of `uid` under `dir`: `<dir>/<uid>`.
pub fn user_dir(dir: &Path, uid: u32) -> PathBuf {
    dir.join(uid.to_string())
}

/// Where `uid`'s counter file is under `dir`: `<dir>/<uid>/answers-<uid>.bin` when the
/// per-user directory exists, and only if it is a directory (not a symlink) owned by
/// `uid` or root and writable by no group or other user (else an error saying why);
/// `<dir>/answers-<uid>.bin` when there is none.
pub fn locate(dir: &Path, uid: u32) -> Result<PathBuf, Error> {
    let own = user_dir(dir, uid);
    match std::fs::symlink_metadata(&own) {
        Ok(meta) => {
            if !meta.is_dir() {
                return Err(Error::Io(format!(
                    "{}: not a directory (a per-user directory made by root)",
                    own.display()
                )));
            }
            if meta.uid() != uid && meta.uid() != 0 {
                return Err(Error::Io(format!(
                    "{}: owned by uid {}, not by uid {uid} or root",
                    own.display(),
                    meta.uid()
                )));
            }
            if meta.mode() & 0o022 != 0 {
                return Err(Error::Io(format!(
                    "{}: writable by others (mode {:o}): another user could replace the file",
                    own.display(),
                    meta.mode() & 0o7777
                )));
            }
            Ok(own.join(file_name(uid)))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(dir.join(file_name(uid))),
        Err(error) => Err(Error::Io(format!("{}: {error}", own.display()))),
    }
}

/// A counter file mapped shared, for the life of the process, with the descriptor its
/// locks are taken on (inherited by forked workers: record locks are per process, so a
/// worker's locks are its own).
#[derive(Debug)]
pub struct MappedFile {
    fd: i32,
    words: &'static [AtomicU64],
    path: PathBuf,
}

impl MappedFile {
    /// Maps this user's (euid's) counter file under `dir` ([`locate`]), creating `dir`
    /// (0755, when the user can) and the file when missing.
    pub fn open(dir: &Path) -> Result<MappedFile, Error> {
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let path = locate(dir, uid)?;
        if path.parent() == Some(dir) {
            let _ = std::fs::DirBuilder::new().mode(0o755).create(dir);
        }
        MappedFile::open_path(&path)
    }

    /// Maps the counter file `path`, creating it ([`FILE_MODE`], sized to the layout) when
    /// missing, and setting its mode to [`FILE_MODE`] when it was another (a file made
    /// `0644` before). Refuses a file that is not a regular file owned by this user, or of
    /// another size. Takes no lock.
    pub fn open_path(path: &Path) -> Result<MappedFile, Error> {
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let path = path.to_owned();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&path)
            .map_err(|error| Error::Io(format!("{}: {error}", path.display())))?;
        let meta = file
            .metadata()
            .map_err(|error| Error::Io(format!("{}: {error}", path.display())))?;
        if !meta.is_file() || meta.uid() != uid {
            return Err(Error::Io(format!(
                "{}: not a regular file of uid {uid}",
                path.display()
            )));
        }
        if meta.mode() & 0o7777 != FILE_MODE {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
                .map_err(|error| Error::Io(format!("{}: chmod: {error}", path.display())))?;
        }
        match meta.len() {
            0 => file
                .set_len(FILE_BYTES as u64)
                .map_err(|error| Error::Io(format!("{}: {error}", path.display())))?,
            len if len == FILE_BYTES as u64 => {}
            len => {
                return Err(Error::Size {
                    found: len as usize,
                    expected: FILE_BYTES,
                });
            }
        }
        use std::os::fd::IntoRawFd;
        let fd = file.into_raw_fd();
        // SAFETY: a fresh shared mapping of a file of FILE_BYTES bytes, never unmapped.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                FILE_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if address == libc::MAP_FAILED {
            let error = errno("mmap");
            // SAFETY: our descriptor.
            unsafe { libc::close(fd) };
            return Err(error);
        }
        // SAFETY: the mapping is FILE_BYTES long, page aligned, lives as long as the
        // process, and is only accessed through atomics.
        let words = unsafe { std::slice::from_raw_parts(address.cast::<AtomicU64>(), FILE_WORDS) };
        Ok(MappedFile { fd, words, path })
    }

    /// The mapped words.
    pub fn words(&self) -> &'static [AtomicU64] {
        self.words
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The record locks on this file's descriptor.
    pub fn locks(&self) -> FileLocks {
        FileLocks { fd: self.fd }
    }
}

/// `fcntl` record locks on a counter file: a slot's first byte for its worker, the label
/// count's first byte for the registry. The kernel drops them when the process dies.
#[derive(Debug, Clone, Copy)]
pub struct FileLocks {
    fd: i32,
}

impl FileLocks {
    /// Takes (or, with `F_UNLCK`, releases) a lock on one byte with `F_SETLK`: never
    /// waits for a lock another process holds (docs/traffic.md, "Trust").
    fn lock(&self, byte: usize, kind: i32) -> bool {
        // SAFETY: a zeroed flock is valid; the fields are set below.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = kind as libc::c_short;
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        lock.l_start = byte as libc::off_t;
        lock.l_len = 1;
        loop {
            // SAFETY: our descriptor and a valid flock.
            let result = unsafe { libc::fcntl(self.fd, libc::F_SETLK, &lock) };
            if result == 0 {
                return true;
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return false;
            }
        }
    }
}

impl Locks for FileLocks {
    fn try_lock_slot(&self, slot: usize) -> bool {
        self.lock(slot_offset(slot) * 8, libc::F_WRLCK)
    }

    fn try_with_registry_lock<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let byte = header::LABEL_COUNT * 8;
        if !self.lock(byte, libc::F_WRLCK) {
            return None;
        }
        let result = f();
        self.lock(byte, libc::F_UNLCK);
        Some(result)
    }
}

/// What a reader found in a directory.
#[derive(Debug, Default)]
pub struct DirectoryTotals {
    /// The files' totals, added up.
    pub totals: Totals,
    /// The files read.
    pub files: usize,
    /// Why each file that was not read was not (name escaped by the caller), the first
    /// [`MAX_REFUSALS_KEPT`].
    pub refused: Vec<(String, Error)>,
    /// Refusals past the ones kept.
    pub refused_more: usize,
    /// Whether entries were left unscanned ([`MAX_SCANNED_ENTRIES`]).
    pub unscanned: bool,
}

impl DirectoryTotals {
    fn refuse(&mut self, name: String, why: Error) {
        if self.refused.len() < MAX_REFUSALS_KEPT {
            self.refused.push((name, why));
        } else {
            self.refused_more += 1;
        }
    }
}

/// The uid a counter file's name gives, if the name is exactly [`file_name`]'s for it
/// (`answers-<uid>.bin`, the uid in canonical decimal).
pub fn uid_of_file_name(name: &[u8]) -> Option<u32> {
    let digits = name.strip_prefix(b"answers-")?.strip_suffix(b".bin")?;
    let text = std::str::from_utf8(digits).ok()?;
    let uid: u32 = text.parse().ok()?;
    (file_name(uid).as_bytes() == name).then_some(uid)
}

/// Reads the counter files in `dir`: at most [`MAX_SCANNED_ENTRIES`] entries looked at,
/// only names that are exactly `answers-<uid>.bin`, at most [`MAX_FILES`] of them (lowest
/// uid first); each opened without following a symlink or blocking, taken only if a
/// regular file owned by the uid its name gives (another user cannot stand in for it) of
/// exactly the layout's size, read into a buffer and parsed. A missing directory reads as
/// no files.
pub fn read_directory(dir: &Path) -> DirectoryTotals {
    let mut found = DirectoryTotals::default();
    let Ok(mut entries) = std::fs::read_dir(dir) else {
        return found;
    };
    let mut named: Vec<(u32, std::ffi::OsString)> = Vec::new();
    for entry in entries.by_ref().take(MAX_SCANNED_ENTRIES) {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let bytes = name.as_bytes();
        if !(bytes.starts_with(b"answers-") && bytes.ends_with(b".bin")) {
            continue;
        }
        match uid_of_file_name(bytes) {
            Some(uid) => named.push((uid, name)),
            None => found.refuse(
                String::from_utf8_lossy(bytes).into_owned(),
                Error::Io("not a counter file name (answers-<uid>.bin)".into()),
            ),
        }
    }
    found.unscanned = entries.next().is_some();
    named.sort();
    for (index, (uid, name)) in named.into_iter().enumerate() {
        let shown = String::from_utf8_lossy(name.as_bytes()).into_owned();
        if index >= MAX_FILES {
            found.refuse(shown, Error::Io(format!("more than {MAX_FILES} files")));
            continue;
        }
        match read_file_of(&dir.join(&name), Some(uid)) {
            Ok(totals) => {
                found.totals.add(totals);
                found.files += 1;
            }
            Err(error) => found.refuse(shown, error),
        }
    }
    found
}

/// What became of one configured user's counter file in a read ([`read_users`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    /// Read, and its counts taken.
    Read,
    /// Not there (the user has not run PHP with counting on since the directory was made,
    /// or its per-user directory is missing): its answers, if any, are not counted.
    Missing,
    /// There but not taken, and why (not the user's, not a regular file, another size or
    /// layout, a per-user directory another user could write).
    Refused(Error),
}

impl FileState {
    /// Its name, as the agent's `dw_agent_counter_files{state}` label says it.
    pub fn name(&self) -> &'static str {
        match self {
            FileState::Read => "read",
            FileState::Missing => "missing",
            FileState::Refused(_) => "refused",
        }
    }
}

/// What a reader found for the configured users.
#[derive(Debug, Default)]
pub struct UsersTotals {
    /// The files' totals, added up.
    pub totals: Totals,
    /// Each configured user's file: its uid, where it was looked for, and what became of it.
    pub files: Vec<(u32, PathBuf, FileState)>,
}

/// Reads the counter files of `uids` under `dir`, each opened by its name ([`locate`]),
/// never found by listing the directory: no file of another user, and no number of other
/// names, can take a user's place or hide it. At most [`MAX_FILES`] uids (the rest are
/// refused, each said so); each file taken only if a regular file owned by its uid (not
/// followed if a symlink, not blocked on if a FIFO) of exactly the layout's size, read into
/// a buffer and parsed as hostile input.
pub fn read_users(dir: &Path, uids: &[u32]) -> UsersTotals {
    let mut found = UsersTotals::default();
    for (index, &uid) in uids.iter().enumerate() {
        let path = match locate(dir, uid) {
            Ok(path) => path,
            Err(error) => {
                found
                    .files
                    .push((uid, user_dir(dir, uid), FileState::Refused(error)));
                continue;
            }
        };
        if index >= MAX_FILES {
            let why = Error::Io(format!("more than {MAX_FILES} PHP users configured"));
            found.files.push((uid, path, FileState::Refused(why)));
            continue;
        }
        let missing = matches!(std::fs::symlink_metadata(&path),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound);
        let state = if missing {
            FileState::Missing
        } else {
            match read_file_of(&path, Some(uid)) {
                Ok(totals) => {
                    found.totals.add(totals);
                    FileState::Read
                }
                Err(error) => FileState::Refused(error),
            }
        };
        found.files.push((uid, path, state));
    }
    found
}

/// One counter file, read as hostile input.
pub fn read_file(path: &Path) -> Result<Totals, Error> {
    read_file_of(path, None)
}

/// [`read_file`], refusing a file not owned by `owner` when given.
fn read_file_of(path: &Path, owner: Option<u32>) -> Result<Totals, Error> {
    let io = |error: std::io::Error| Error::Io(error.to_string());
    let _ =
        CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::Io("NUL in path".into()))?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(Error::Io("not a regular file".into()));
    }
    if let Some(owner) = owner.filter(|&owner| owner != meta.uid()) {
        return Err(Error::Io(format!(
            "owned by uid {}, not by uid {owner} its name gives",
            meta.uid()
        )));
    }
    if meta.len() != FILE_BYTES as u64 {
        return Err(Error::Size {
            found: meta.len().min(usize::MAX as u64) as usize,
            expected: FILE_BYTES,
        });
    }
    let mut bytes = Vec::with_capacity(FILE_BYTES);
    // One byte more than the layout's, to see a file that grew since fstat.
    File::take(file, FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    parse(&bytes)
}
