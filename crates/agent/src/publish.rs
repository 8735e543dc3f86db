//! Publishing the snapshot file: atomic replacement, and the rules that decide whether a
//! state may replace the published one at all.
//!
//! Readers mmap the file, so it is never written in place: each publication is a new file
//! in the same directory (written, fsynced, mode 0644) renamed over the old name, then the
//! directory is fsynced. A reader sees the old file or the new one, never a mix.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use dw_routing::{Snapshot, SnapshotWriter};
use tracing::{info, warn};

use crate::Error;

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
    /// Revision of the published file; `None` when there is none (or it is unreadable).
    published_revision: Option<u64>,
    published_has_regions: bool,
    temp_counter: u64,
    /// Keeps each key's serialised form, so a change re-escapes only what changed.
    writer: SnapshotWriter,
}

impl Publisher {
    /// Opens the snapshot's directory: checks that a file can be created in it, removes
    /// temp files left by dead agents, and reads the published snapshot if there is one.
    pub(crate) fn open(
        path: &Path,
        allow_empty: bool,
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
        let dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut publisher = Publisher {
            path: path.to_path_buf(),
            dir,
            file_name,
            allow_empty,
            published_revision: None,
            published_has_regions: false,
            temp_counter: 0,
            writer: SnapshotWriter::new(),
        };
        publisher.probe().map_err(|source| Error::SnapshotDir {
            dir: publisher.dir.clone(),
            source,
        })?;
        publisher.remove_stale_temp_files();
        let published = publisher.read_published();
        if let Some(snapshot) = &published {
            publisher.published_revision = Some(snapshot.revision);
            publisher.published_has_regions = has_region_keys(snapshot);
        }
        Ok((publisher, published))
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
        let bytes = self.writer.to_json(snapshot);
        match self.write(&bytes) {
            Ok(renamed_at) => {
                self.published_revision = Some(snapshot.revision);
                self.published_has_regions = has_regions;
                Outcome::Written(Publication {
                    revision: snapshot.revision,
                    keys: snapshot.kvs.len(),
                    renamed_at,
                })
            }
            Err(e) => Outcome::Failed(e),
        }
    }

    /// Writes a new file and renames it over the published one.
    fn write(&mut self, bytes: &[u8]) -> io::Result<Instant> {
        self.temp_counter += 1;
        let temp = self.dir.join(format!(
            ".{}.{}.{}.tmp",
            self.file_name,
            std::process::id(),
            self.temp_counter
        ));
        let written = write_synced(&temp, bytes).and_then(|()| fs::rename(&temp, &self.path));
        if let Err(e) = written {
            // Best effort: the temp file is garbage now, and the published file is untouched.
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        let renamed_at = Instant::now();
        // The rename is what readers see; the directory fsync only makes it durable. A
        // failure here is logged, not treated as unpublished (that would publish twice).
        if let Err(e) = File::open(&self.dir).and_then(|dir| dir.sync_all()) {
            warn!(dir = %self.dir.display(), error = %e, "fsync of the snapshot directory failed");
        }
        Ok(renamed_at)
    }

    fn probe(&self) -> io::Result<()> {
        let metadata = fs::metadata(&self.dir)?;
        if !metadata.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        let probe = self.dir.join(format!(
            ".{}.{}.probe.tmp",
            self.file_name,
            std::process::id()
        ));
        let result = write_synced(&probe, b"");
        let _ = fs::remove_file(&probe);
        result
    }

    /// Temp files are named `.<file>.<pid>.<n>.tmp`; those of processes that no longer
    /// exist are leftovers of a killed agent.
    fn remove_stale_temp_files(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let own_prefix = format!(".{}.", self.file_name);
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(rest) = name
                .strip_prefix(&own_prefix)
                .and_then(|r| r.strip_suffix(".tmp"))
            else {
                continue;
            };
            let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                match fs::remove_file(entry.path()) {
                    Ok(()) => info!(file = name, "removed a temp file left by a dead agent"),
                    Err(e) => warn!(file = name, error = %e, "cannot remove a stale temp file"),
                }
            }
        }
    }

    fn read_published(&self) -> Option<Snapshot> {
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                info!(snapshot = %self.path.display(), "no published snapshot yet");
                return None;
            }
            Err(e) => {
                warn!(snapshot = %self.path.display(), error = %e, "cannot read the published snapshot; it will be replaced");
                return None;
            }
        };
        match Snapshot::parse(&bytes) {
            Ok(snapshot) => {
                info!(
                    snapshot = %self.path.display(),
                    revision = snapshot.revision,
                    keys = snapshot.kvs.len(),
                    "found the last published snapshot"
                );
                Some(snapshot)
            }
            Err(e) => {
                warn!(snapshot = %self.path.display(), error = %e, "the published snapshot is unreadable; it will be replaced");
                None
            }
        }
    }
}

/// Creates `path` (which must not exist) with mode 0644, writes `bytes` and fsyncs it.
fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)?;
    // The umask may have narrowed the mode; readers run as another user.
    file.set_permissions(Permissions::from_mode(0o644))?;
    file.write_all(bytes)?;
    file.sync_all()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(revision: u64, keys: &[&str]) -> Snapshot {
        let mut snapshot = Snapshot::new(revision, "/p/");
        for key in keys {
            snapshot.kvs.insert((*key).to_owned(), "{}".to_owned());
        }
        snapshot
    }

    #[test]
    fn writes_atomically_with_mode_0644_and_no_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let (mut publisher, published) = Publisher::open(&path, false).unwrap();
        assert!(published.is_none());
        assert!(matches!(
            publisher.publish(&snapshot(3, &["/p/region/DE"])),
            Outcome::Written(_)
        ));
        assert!(matches!(
            publisher.publish(&snapshot(4, &["/p/region/FR"])),
            Outcome::Written(_)
        ));
        let on_disk = Snapshot::parse(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk, snapshot(4, &["/p/region/FR"]));
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o644
        );
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["s.json"]);
    }

    #[test]
    fn never_goes_backwards_nor_reuses_a_revision() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let (mut publisher, _) = Publisher::open(&path, false).unwrap();
        assert!(matches!(
            publisher.publish(&snapshot(10, &["/p/a"])),
            Outcome::Written(_)
        ));
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
        let (mut reopened, published) = Publisher::open(&path, false).unwrap();
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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let (mut publisher, _) = Publisher::open(&path, false).unwrap();
        // No regions over no regions is fine (a fresh cluster).
        assert!(matches!(
            publisher.publish(&snapshot(1, &["/p/policy/global"])),
            Outcome::Written(_)
        ));
        assert!(matches!(
            publisher.publish(&snapshot(2, &["/p/region/DE"])),
            Outcome::Written(_)
        ));
        assert!(matches!(
            publisher.publish(&snapshot(3, &["/p/policy/global", "/p/regionless"])),
            Outcome::Held(Hold::NoRegions { revision: 3 })
        ));
        assert_eq!(
            Snapshot::parse(&fs::read(&path).unwrap()).unwrap().revision,
            2
        );

        let (mut permissive, _) = Publisher::open(&path, true).unwrap();
        assert!(matches!(
            permissive.publish(&snapshot(3, &[])),
            Outcome::Written(_)
        ));
    }

    #[test]
    fn an_unusable_directory_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        fs::write(&file, b"x").unwrap();
        let err = Publisher::open(&file.join("s.json"), false).unwrap_err();
        assert!(matches!(err, Error::SnapshotDir { .. }), "{err}");
        let err = Publisher::open(&dir.path().join("missing/s.json"), false).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }

    #[test]
    fn stale_temp_files_of_dead_agents_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        // 999999999 is above the kernel's pid_max, so no such process exists.
        let dead = dir.path().join(".s.json.999999999.3.tmp");
        let live = dir
            .path()
            .join(format!(".s.json.{}.1.tmp", std::process::id()));
        let other = dir.path().join(".t.json.999999999.1.tmp");
        for file in [&dead, &live, &other] {
            fs::write(file, b"partial").unwrap();
        }
        Publisher::open(&path, false).unwrap();
        assert!(!dead.exists());
        assert!(live.exists());
        assert!(other.exists());
    }

    #[test]
    fn an_unreadable_published_file_is_treated_as_absent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        fs::write(&path, b"{\"format\":1,\"revision\":5").unwrap();
        let (mut publisher, published) = Publisher::open(&path, false).unwrap();
        assert!(published.is_none());
        assert_eq!(publisher.published_revision(), None);
        assert!(matches!(
            publisher.publish(&snapshot(1, &[])),
            Outcome::Written(_)
        ));
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
