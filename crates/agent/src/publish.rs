//! Publishing the snapshot file: the rules that decide whether a state may replace the
//! published one at all, and what the agent knows of the published file.
//!
//! Readers mmap the file, so it is never written in place: each publication is a new file
//! in the same directory renamed over the old name, then the directory is fsynced. A
//! reader sees the old file or the new one, never a mix. The directory may be shared with
//! others, so the published file is honoured only if the agent's user owns it, it records
//! the etcd cluster being mirrored and its revision is not beyond etcd's; the file
//! handling itself is in `snapshot_dir`.

pub(crate) mod snapshot_dir;

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dw_routing::{Snapshot, SnapshotWriter};
use dw_snapshot_trust::{Refused, TrustedOwner};
use tracing::warn;

use dw_etcd::Backoff;

use crate::error::Error;
use crate::publish::snapshot_dir::{
    lock, probe, read_published, remove_stale_temp_files, write_atomically,
};

/// One successful publication, as reported to an observer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    /// The revision written into the file.
    pub revision: u64,
    /// How many keys the file holds.
    pub keys: usize,
    /// When the rename completed.
    pub renamed_at: Instant,
}

/// Why a state was not published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hold {
    /// The state is at or below the published revision with different keys: publishing
    /// it would move the file's revision backwards or reuse one (etcd restored from an
    /// older backup, or a member far behind).
    NotNewer { state: u64, published: u64 },
    /// The published file has region keys and this state has none (see `--allow-empty`).
    NoRegions { revision: u64 },
}

impl std::fmt::Display for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hold::NotNewer { state, published } => write!(
                f,
                "etcd state at revision {state} differs from the published snapshot at revision \
                 {published}; holding the published snapshot until etcd moves past it"
            ),
            Hold::NoRegions { revision } => write!(
                f,
                "etcd state at revision {revision} has no region keys; keeping the published \
                 snapshot (start with --allow-empty to publish it)"
            ),
        }
    }
}

/// What an attempt to publish did.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The file now holds the state.
    Written(Publication),
    /// The rules kept the published file.
    Held(Hold),
    /// Writing failed; the published file is as it was.
    Failed(io::Error),
}

/// The snapshot file and what it holds.
#[derive(Debug)]
pub(crate) struct Publisher {
    path: PathBuf,
    dir: PathBuf,
    file_name: String,
    allow_empty: bool,
    /// Revision of the published file; `None` when there is none (or it is unreadable or
    /// not trusted).
    published_revision: Option<u64>,
    published_has_regions: bool,
    /// The etcd cluster id the published file records.
    published_cluster_id: Option<String>,
    /// Why the file at the path is being replaced rather than honoured, until a
    /// publication replaces it.
    untrusted: Option<String>,
    /// Keeps each key's serialised form, so a change re-escapes only what changed.
    writer: SnapshotWriter,
    /// Whose files the readers trust (their `dw_router.trusted_owner`).
    readers: TrustedOwner,
    /// The exclusive lock on `.<name>.lock`, held for the agent's life.
    _lock: File,
}

impl Publisher {
    /// Opens the snapshot's directory: checks that a file can be created in it, removes
    /// temp files left by dead agents, and reads the published snapshot if there is one.
    pub(crate) fn open(
        path: &Path,
        allow_empty: bool,
        readers: TrustedOwner,
    ) -> Result<(Publisher, Option<Snapshot>), Error> {
        let file_name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| {
                Error::Config(format!(
                    "--snapshot {} does not name a UTF-8 file",
                    path.display()
                ))
            })?
            .to_owned();
        // A directory at the path can never be replaced by a file (rename fails with
        // EISDIR): retrying would never succeed, so this is a configuration error.
        if fs::symlink_metadata(path).is_ok_and(|metadata| metadata.is_dir()) {
            return Err(Error::Config(format!(
                "--snapshot {} is a directory; give the path of the snapshot file, e.g. {}",
                path.display(),
                path.join("routing.json").display()
            )));
        }
        let dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        probe(&dir, &file_name).map_err(|source| Error::SnapshotDir {
            dir: dir.clone(),
            source,
        })?;
        let lock = lock(&dir, &file_name)?;
        let mut publisher = Publisher {
            path: path.to_path_buf(),
            dir,
            file_name,
            allow_empty,
            published_revision: None,
            published_has_regions: false,
            published_cluster_id: None,
            untrusted: None,
            writer: SnapshotWriter::new(),
            readers,
            _lock: lock,
        };
        remove_stale_temp_files(&publisher.dir, &publisher.file_name);
        let published = match read_published(&publisher.path) {
            Ok(published) => published,
            Err(reason) => {
                warn!(snapshot = %publisher.path.display(), reason = %reason,
                    "the file at the snapshot path is not trusted; it will be replaced");
                publisher.untrusted = Some(reason);
                None
            }
        };
        if let Some(snapshot) = &published {
            publisher.published_revision = Some(snapshot.revision);
            publisher.published_has_regions = has_region_keys(snapshot);
            publisher.published_cluster_id = snapshot.cluster_id.clone();
        }
        Ok((publisher, published))
    }

    /// Checks the published file against etcd as a listing found it: a file recording
    /// another cluster, or a revision beyond etcd's current one, was not written from this
    /// etcd (an attacker's, or a cluster since restored or rebuilt). It is then no longer
    /// honoured: the next publication replaces it whatever its revision and keys. Returns
    /// the reason when that happens.
    pub(crate) fn distrust_unless_from(
        &mut self,
        cluster_id: u64,
        etcd_revision: u64,
    ) -> Option<String> {
        let cluster = cluster_id.to_string();
        let reason = match (&self.published_cluster_id, self.published_revision) {
            (Some(recorded), _) if *recorded != cluster => format!(
                "it records etcd cluster {recorded}, and etcd is cluster {cluster} (restored, \
                 rebuilt, or not written by this agent)"
            ),
            (_, Some(revision)) if revision > etcd_revision => format!(
                "its revision {revision} is beyond etcd's current revision {etcd_revision} \
                 (etcd restored, or not written by this agent)"
            ),
            _ => return None,
        };
        self.published_revision = None;
        self.published_has_regions = false;
        self.published_cluster_id = None;
        self.untrusted = Some(reason.clone());
        Some(reason)
    }

    /// True (once) when the last publication replaced a file that was not trusted.
    pub(crate) fn take_replaced_untrusted(&mut self) -> Option<String> {
        self.untrusted.take()
    }

    /// Why the readers would refuse the published file by their trust rules (the file,
    /// its directory, every directory above: dw-snapshot-trust), or, before there is one,
    /// a file this agent writes there; None when they take it.
    pub(crate) fn refused_by_readers(&self) -> Option<String> {
        match dw_snapshot_trust::open(&self.path, &self.readers) {
            Ok(_) => None,
            Err(Refused::Refused { message, .. }) => Some(message),
            Err(Refused::Missing) => {
                // SAFETY: geteuid has no failure mode and no memory effects.
                let me = unsafe { libc::geteuid() };
                dw_snapshot_trust::check_directory(&self.dir, &self.readers, me)
                    .err()
                    .map(|refused| refused.to_string())
            }
        }
    }

    /// A failed write in words an operator can act on: a rename refused in a sticky
    /// directory (`/dev/shm`) over another user's file names that file's owner, since
    /// only they or root can remove it, and retrying alone never succeeds.
    pub(crate) fn explain_failure(&self, error: &io::Error) -> String {
        let denied = matches!(error.raw_os_error(), Some(libc::EPERM | libc::EACCES));
        let planted = denied
            .then(|| fs::symlink_metadata(&self.path).ok())
            .flatten()
            .zip(fs::metadata(&self.dir).ok());
        // SAFETY: geteuid has no failure mode and no memory effects.
        let me = unsafe { libc::geteuid() };
        match planted {
            Some((file, dir)) if file.uid() != me && dir.mode() & 0o1000 != 0 => format!(
                "{error}: {} is owned by uid {}{}, not this agent's uid {me}, and its \
                 directory {} is sticky, so only that user or root can replace or remove it \
                 (remove it as root, or use a directory of the agent's own such as \
                 /run/dw-router)",
                self.path.display(),
                file.uid(),
                user_name(file.uid())
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default(),
                self.dir.display()
            ),
            _ => error.to_string(),
        }
    }

    pub(crate) fn published_revision(&self) -> Option<u64> {
        self.published_revision
    }

    /// Checks the rules, then writes `snapshot` if they allow it.
    ///
    /// Callers only offer states whose keys differ from the published file's, so the
    /// revision rule is strict: a changed state must carry a newer revision.
    pub(crate) fn publish(&mut self, snapshot: &Snapshot) -> Outcome {
        if let Some(published) = self.published_revision
            && snapshot.revision <= published
        {
            return Outcome::Held(Hold::NotNewer {
                state: snapshot.revision,
                published,
            });
        }
        let has_regions = has_region_keys(snapshot);
        if self.published_has_regions && !has_regions && !self.allow_empty {
            return Outcome::Held(Hold::NoRegions {
                revision: snapshot.revision,
            });
        }
        let written = write_atomically(
            &self.dir,
            &self.file_name,
            &self.path,
            &mut self.writer,
            snapshot,
        );
        match written {
            Ok(renamed_at) => {
                self.published_revision = Some(snapshot.revision);
                self.published_has_regions = has_regions;
                self.published_cluster_id = snapshot.cluster_id.clone();
                Outcome::Written(Publication {
                    revision: snapshot.revision,
                    keys: snapshot.kvs.len(),
                    renamed_at,
                })
            }
            Err(e) => Outcome::Failed(e),
        }
    }
}

/// The user name of `uid`, when it has one (for messages only).
fn user_name(uid: u32) -> Option<String> {
    let mut buffer = vec![0 as libc::c_char; 16384];
    // SAFETY: plain C structs, zero is a valid bit pattern; getpwuid_r writes into the
    // buffer we own and points `found` at `entry` or sets it to null.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() || entry.pw_name.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded: pw_name is a NUL-terminated string in `buffer`.
    let name = unsafe { std::ffi::CStr::from_ptr(entry.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

/// Whether the snapshot holds any `<prefix>region/` key.
pub(crate) fn has_region_keys(snapshot: &Snapshot) -> bool {
    let start = format!("{}region/", snapshot.prefix);
    snapshot
        .kvs
        .range(start.clone()..)
        .next()
        .is_some_and(|(key, _)| key.starts_with(&start))
}

// Retrying failed snapshot writes with backoff, logging each distinct cause once.

/// Failed writes are retried with backoff, and logged once per distinct cause.
#[derive(Debug)]
pub(crate) struct WriteRetry {
    backoff: Backoff,
    /// No write before this, after a failure.
    not_before: Option<Instant>,
    /// The cause of the last failure, until a write succeeds.
    last_cause: Option<String>,
}

impl WriteRetry {
    pub(crate) fn new(initial: Duration, max: Duration) -> WriteRetry {
        WriteRetry {
            backoff: Backoff::new(initial, max),
            not_before: None,
            last_cause: None,
        }
    }

    pub(crate) fn due(&self, now: Instant) -> bool {
        self.not_before.is_none_or(|not_before| now >= not_before)
    }

    /// A write failed because of `cause`: the delay until the next attempt, and whether
    /// the cause differs from the last failure's (to be logged: once per distinct cause).
    pub(crate) fn failed(&mut self, now: Instant, cause: &str) -> (Duration, bool) {
        let delay = self.backoff.next_delay();
        self.not_before = Some(now + delay);
        let new_cause = self.last_cause.as_deref() != Some(cause);
        self.last_cause = Some(cause.to_owned());
        (delay, new_cause)
    }

    /// A write succeeded; true when it ends a run of failures.
    pub(crate) fn succeeded(&mut self) -> bool {
        self.backoff.reset();
        self.not_before = None;
        self.last_cause.take().is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// `s.json` in a new temp directory (removed when the guard is dropped).
    fn temp_snapshot_path() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        (dir, path)
    }

    #[track_caller]
    fn assert_written(outcome: Outcome) {
        assert!(matches!(outcome, Outcome::Written(_)), "{outcome:?}");
    }

    fn snapshot(revision: u64, keys: &[&str]) -> Snapshot {
        let mut snapshot = Snapshot::new(revision, "/p/");
        for key in keys {
            snapshot.kvs.insert((*key).to_owned(), "{}".to_owned());
        }
        snapshot
    }

    #[test]
    fn writes_atomically_with_mode_0644_and_no_leftovers() {
        let (dir, path) = temp_snapshot_path();
        let (mut publisher, published) =
            Publisher::open(&path, false, TrustedOwner::Default).unwrap();
        assert!(published.is_none());
        assert_written(publisher.publish(&snapshot(3, &["/p/region/DE"])));
        assert_written(publisher.publish(&snapshot(4, &["/p/region/FR"])));
        let on_disk = Snapshot::parse(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk, snapshot(4, &["/p/region/FR"]));
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o644
        );
        assert_eq!(names_in(dir.path()), [".s.json.lock", "s.json"]);
    }

    #[test]
    fn never_goes_backwards_nor_reuses_a_revision() {
        let (_dir, path) = temp_snapshot_path();
        let (mut publisher, _) = Publisher::open(&path, false, TrustedOwner::Default).unwrap();
        assert_written(publisher.publish(&snapshot(10, &["/p/a"])));
        for revision in [9, 10] {
            match publisher.publish(&snapshot(revision, &["/p/b"])) {
                Outcome::Held(Hold::NotNewer {
                    state,
                    published: 10,
                }) => assert_eq!(state, revision),
                other => panic!("published revision {revision}: {other:?}"),
            }
        }
        // A restarted agent remembers the file's revision.
        drop(publisher);
        let (mut reopened, published) =
            Publisher::open(&path, false, TrustedOwner::Default).unwrap();
        assert_eq!(published.unwrap().revision, 10);
        assert!(matches!(
            reopened.publish(&snapshot(7, &["/p/c"])),
            Outcome::Held(_)
        ));
        assert_eq!(
            Snapshot::parse(&fs::read(&path).unwrap()).unwrap().revision,
            10
        );
    }

    #[test]
    fn keeps_region_keys_unless_allowed_to_empty() {
        let (_dir, path) = temp_snapshot_path();
        let (mut publisher, _) = Publisher::open(&path, false, TrustedOwner::Default).unwrap();
        // No regions over no regions is fine (a fresh cluster).
        assert_written(publisher.publish(&snapshot(1, &["/p/policy/global"])));
        assert_written(publisher.publish(&snapshot(2, &["/p/region/DE"])));
        assert!(matches!(
            publisher.publish(&snapshot(3, &["/p/policy/global", "/p/regionless"])),
            Outcome::Held(Hold::NoRegions { revision: 3 })
        ));
        assert_eq!(
            Snapshot::parse(&fs::read(&path).unwrap()).unwrap().revision,
            2
        );

        drop(publisher);
        let (mut permissive, _) = Publisher::open(&path, true, TrustedOwner::Default).unwrap();
        assert_written(permissive.publish(&snapshot(3, &[])));
    }

    #[test]
    fn an_unusable_directory_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        fs::write(&file, b"x").unwrap();
        let err = Publisher::open(&file.join("s.json"), false, TrustedOwner::Default).unwrap_err();
        assert!(matches!(err, Error::SnapshotDir { .. }), "{err}");
        let err = Publisher::open(
            &dir.path().join("missing/s.json"),
            false,
            TrustedOwner::Default,
        )
        .unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn stale_temp_files_of_killed_agents_are_removed() {
        let (dir, path) = temp_snapshot_path();
        // Holding the lock, the agent knows every temp file of its user is a leftover,
        // whatever pid an older agent put in its name.
        let leftovers = [
            ".s.json.999999999.3.tmp",
            ".s.json.1.1.tmp",
            ".s.json.Ab3dE6g8",
        ];
        let kept = [
            ".t.json.999999999.1.tmp",
            ".s.json.notours",
            ".s.json.Ab3dE6g8x",
        ];
        for name in leftovers.iter().chain(&kept) {
            fs::write(dir.path().join(name), b"partial").unwrap();
        }
        let _publisher = Publisher::open(&path, false, TrustedOwner::Default).unwrap();
        let mut expected: Vec<&str> = kept.to_vec();
        expected.push(".s.json.lock");
        expected.sort();
        assert_eq!(names_in(dir.path()), expected);
    }

    #[test]
    fn a_second_publisher_of_a_path_is_refused_naming_the_holder() {
        let (dir, path) = temp_snapshot_path();
        let first = Publisher::open(&path, false, TrustedOwner::Default).unwrap();
        match Publisher::open(&path, false, TrustedOwner::Default) {
            Err(Error::Locked { lock, holder }) => {
                assert_eq!(lock, dir.path().join(".s.json.lock"));
                assert_eq!(holder, Some(std::process::id()));
            }
            other => panic!("{other:?}"),
        }
        drop(first);
        Publisher::open(&path, false, TrustedOwner::Default).unwrap();
    }

    #[test]
    fn a_symlink_a_fifo_or_another_users_file_is_not_honoured_and_is_replaced() {
        let (dir, path) = temp_snapshot_path();
        let hostile = {
            let mut snapshot = snapshot(i64::MAX as u64, &["/p/region/DE"]);
            snapshot.cluster_id = Some("1".into());
            snapshot.to_json()
        };
        let victim = dir.path().join("victim.json");
        fs::write(&victim, &hostile).unwrap();
        type Plant = Box<dyn Fn(&Path)>;
        let plants: [(&str, Plant); 3] = [
            (
                "symbolic link",
                Box::new({
                    let victim = victim.clone();
                    move |path: &Path| std::os::unix::fs::symlink(&victim, path).unwrap()
                }),
            ),
            (
                "FIFO",
                Box::new(|path: &Path| {
                    let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
                    // SAFETY: a NUL-terminated path.
                    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
                }),
            ),
            (
                "owned by uid 65534",
                Box::new({
                    let hostile = hostile.clone();
                    move |path: &Path| {
                        fs::write(path, &hostile).unwrap();
                        std::os::unix::fs::chown(path, Some(65534), None).unwrap();
                    }
                }),
            ),
        ];
        for (what, plant) in plants {
            let _ = fs::remove_file(&path);
            plant(&path);
            let (mut publisher, published) =
                Publisher::open(&path, false, TrustedOwner::Default).unwrap();
            assert!(published.is_none(), "{what}");
            let reason = publisher.untrusted.clone().unwrap_or_default();
            assert!(reason.contains(what), "{what}: {reason}");
            assert_written(publisher.publish(&snapshot(3, &["/p/region/FR"])));
            assert!(publisher.take_replaced_untrusted().is_some());
            let meta = fs::symlink_metadata(&path).unwrap();
            assert!(meta.is_file(), "{what}");
            assert_eq!(
                Snapshot::parse(&fs::read(&path).unwrap()).unwrap().revision,
                3
            );
        }
        assert_eq!(
            fs::read(&victim).unwrap(),
            hostile,
            "the link's target is untouched"
        );
    }

    #[test]
    fn a_file_of_another_cluster_or_beyond_etcd_is_distrusted() {
        let (_dir, path) = temp_snapshot_path();
        let mut state = snapshot(10, &["/p/region/DE"]);
        state.cluster_id = Some("7".into());
        let (mut publisher, _) = Publisher::open(&path, false, TrustedOwner::Default).unwrap();
        assert_written(publisher.publish(&state));
        // The same cluster, at or past the file's revision: honoured.
        assert_eq!(publisher.distrust_unless_from(7, 10), None);
        assert_eq!(publisher.distrust_unless_from(7, 99), None);
        // etcd restored from a backup older than the file: replaced, lower revision and all.
        let reason = publisher.distrust_unless_from(7, 4).unwrap();
        assert!(
            reason.contains("beyond etcd's current revision 4"),
            "{reason}"
        );
        state.revision = 4;
        assert_written(publisher.publish(&state));
        // Another cluster (rebuilt): replaced too.
        let reason = publisher.distrust_unless_from(8, 50).unwrap();
        assert!(reason.contains("records etcd cluster 7"), "{reason}");
        drop(publisher);
        // A file without a cluster id (an older agent's) is judged by its revision alone.
        fs::write(&path, snapshot(10, &["/p/region/DE"]).to_json()).unwrap();
        let (mut publisher, published) =
            Publisher::open(&path, false, TrustedOwner::Default).unwrap();
        assert!(published.is_some());
        assert_eq!(publisher.distrust_unless_from(7, 10), None);
        assert!(publisher.distrust_unless_from(7, 9).is_some());
    }

    #[test]
    fn an_unreadable_published_file_is_treated_as_absent() {
        let (_dir, path) = temp_snapshot_path();
        fs::write(&path, b"{\"format\":1,\"revision\":5").unwrap();
        let (mut publisher, published) =
            Publisher::open(&path, false, TrustedOwner::Default).unwrap();
        assert!(published.is_none());
        assert_eq!(publisher.published_revision(), None);
        assert_written(publisher.publish(&snapshot(1, &[])));
    }

    #[test]
    fn region_keys_are_recognised_by_prefix() {
        assert!(has_region_keys(&snapshot(
            1,
            &["/p/origin/a", "/p/region/DE"]
        )));
        assert!(!has_region_keys(&snapshot(
            1,
            &["/p/origin/a", "/p/regions", "/q/region/DE"]
        )));
    }
}
