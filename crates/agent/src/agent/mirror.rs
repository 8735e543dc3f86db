//! The in-memory copy of the prefix: replaced whole by a list, advanced by watch responses.
//!
//! The mirror's revision is always the etcd revision its keys reflect, and it tracks whether
//! its keys differ from what was last published, so the agent writes only on change.

use std::collections::{BTreeMap, BTreeSet};

use dw_etcd::PrefixHead;
use dw_routing::Snapshot;
use etcd_client::{Event, EventType};
use tracing::warn;

use crate::etcd::listing::{Listing, is_stage_key};

/// The state of the prefix as the agent knows it.
#[derive(Debug)]
pub(crate) struct Mirror {
    snapshot: Snapshot,
    unrepresentable: BTreeSet<Vec<u8>>,
    /// The `mod_revision` of each stage key (see [`Listing::stage_revisions`]).
    stage_revisions: BTreeMap<String, u64>,
    /// True when `snapshot.kvs` differs from the published file's keys.
    dirty: bool,
}

/// What applying a watch response did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Events at or below the mirror's revision, skipped (etcd never sends them; counted
    /// in case it ever does, since applying them twice would be harmless but wrong to hide).
    pub(crate) stale_events: usize,
    /// Whether any key changed.
    pub(crate) changed: bool,
}

impl Mirror {
    /// Starts from the published snapshot (if it mirrors this prefix), so that an
    /// unchanged etcd causes no write after a restart.
    /// Takes the published snapshot rather than copying it: at 100,000 keys a copy is
    /// tens of megabytes.
    pub(crate) fn new(prefix: &str, published: Option<Snapshot>) -> Mirror {
        match published {
            // A file with stages applied holds effective values, not etcd's: it is the
            // mirror's start only for its revision, and the first listing republishes.
            Some(published) if published.prefix == prefix && published.stages.is_empty() => {
                Mirror {
                    snapshot: published,
                    unrepresentable: BTreeSet::new(),
                    stage_revisions: BTreeMap::new(),
                    dirty: false,
                }
            }
            published => {
                let revision = published
                    .filter(|published| published.prefix == prefix)
                    .map_or(0, |published| published.revision);
                Mirror {
                    snapshot: Snapshot::new(revision, prefix),
                    unrepresentable: BTreeSet::new(),
                    stage_revisions: BTreeMap::new(),
                    dirty: true,
                }
            }
        }
    }

    pub(crate) fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    pub(crate) fn revision(&self) -> u64 {
        self.snapshot.revision
    }

    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty
    }

    pub(crate) fn mark_published(&mut self) {
        self.dirty = false;
    }

    /// The published file is to be replaced whatever it holds (it is not trusted).
    pub(crate) fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// The `mod_revision` of each stage key the mirror holds.
    pub(crate) fn stage_revisions(&self) -> &BTreeMap<String, u64> {
        &self.stage_revisions
    }

    pub(crate) fn unrepresentable_keys(&self) -> usize {
        self.unrepresentable.len()
    }

    /// Whether a read of the prefix (made after this mirror's revision) shows a change the
    /// mirror lacks: `None` when it shows nothing newer, else the revision the mirror must
    /// reach for the read to be explained. Any put raises the newest `mod_revision`; deletes
    /// alone change the key count.
    pub(crate) fn lacks(&self, read: PrefixHead) -> Option<u64> {
        let keys = (self.snapshot.kvs.len() + self.unrepresentable.len()) as u64;
        if read.newest_mod_revision > self.snapshot.revision {
            Some(read.newest_mod_revision)
        } else if read.keys != keys {
            Some(self.snapshot.revision + 1)
        } else {
            None
        }
    }

    /// Replaces the state with a fresh listing.
    pub(crate) fn replace(&mut self, listing: Listing) {
        if listing.kvs != self.snapshot.kvs {
            self.dirty = true;
        }
        self.snapshot.kvs = listing.kvs;
        self.snapshot.revision = listing.revision;
        // Recorded in the next publication. A change of cluster alone is not a change of
        // keys: the agent compares cluster ids with the published file (see `Publisher`).
        self.snapshot.cluster_id = Some(listing.cluster_id.to_string());
        self.unrepresentable = listing.unrepresentable;
        self.stage_revisions = listing.stage_revisions;
    }

    /// Applies the events of one watch response. The mirror's revision becomes the last
    /// event's revision, not the response header's: while a watcher catches up, etcd sends
    /// batches whose header carries the store's current revision, ahead of the events in them.
    pub(crate) fn apply(&mut self, events: &[Event]) -> Applied {
        let mut applied = Applied {
            stale_events: 0,
            changed: false,
        };
        let floor = self.snapshot.revision;
        for event in events {
            let Some(kv) = event.kv() else { continue };
            let revision = u64::try_from(kv.mod_revision()).unwrap_or(0);
            if revision <= floor {
                applied.stale_events += 1;
                continue;
            }
            // `Event::event_type` panics on an unknown number; read the raw field instead.
            let is_put = EventType::try_from(event.0.r#type) == Ok(EventType::Put);
            let changed = if is_put {
                self.put(kv.key(), kv.value(), revision)
            } else {
                self.delete(kv.key())
            };
            applied.changed |= changed;
            self.snapshot.revision = self.snapshot.revision.max(revision);
        }
        self.dirty |= applied.changed;
        applied
    }

    fn put(&mut self, key: &[u8], value: &[u8], revision: u64) -> bool {
        match (std::str::from_utf8(key), std::str::from_utf8(value)) {
            (Ok(key), Ok(value)) => {
                self.unrepresentable.remove(key.as_bytes());
                if is_stage_key(key) {
                    // The value decides whether nodes republish; an unchanged value keeps
                    // the revision the published file names.
                    if self.snapshot.kvs.get(key).map(String::as_str) != Some(value) {
                        self.stage_revisions.insert(key.to_owned(), revision);
                    }
                }
                let previous = self.snapshot.kvs.insert(key.to_owned(), value.to_owned());
                previous.as_deref() != Some(value)
            }
            (key_text, _) => {
                warn!(
                    key = %String::from_utf8_lossy(key),
                    "a watched key or its new value is not UTF-8; the key is left out of the \
                     snapshot (counted in dw_agent_unrepresentable_keys)"
                );
                self.unrepresentable.insert(key.to_vec());
                // etcd no longer holds the old value: drop it rather than keep a stale one.
                key_text.is_ok_and(|key| self.snapshot.kvs.remove(key).is_some())
            }
        }
    }

    fn delete(&mut self, key: &[u8]) -> bool {
        self.unrepresentable.remove(key);
        if let Ok(key) = std::str::from_utf8(key) {
            self.stage_revisions.remove(key);
        }
        std::str::from_utf8(key).is_ok_and(|key| self.snapshot.kvs.remove(key).is_some())
    }
}

/// Hands the memory of the state a listing replaced back to the kernel. glibc keeps freed
/// heap pages otherwise, so the resident size would stay at the listing's peak (two states
/// at once) for good. Once per listing; a few milliseconds at 100,000 keys.
pub(crate) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; no memory in use is
    // touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_client::proto::{PbEvent, PbKeyValue};

    fn put(key: &str, value: &[u8], revision: i64) -> Event {
        event(0, key.as_bytes(), value, revision)
    }

    fn event(kind: i32, key: &[u8], value: &[u8], revision: i64) -> Event {
        Event(PbEvent {
            r#type: kind,
            kv: Some(PbKeyValue {
                key: key.to_vec(),
                value: value.to_vec(),
                mod_revision: revision,
                create_revision: if kind == 0 { revision } else { 0 },
                version: 1,
                lease: 0,
            }),
            prev_kv: None,
        })
    }

    #[test]
    fn a_read_explained_by_the_mirror_shows_nothing_lacking() {
        let mut mirror = published_a_at_10();
        let read = |keys, newest_mod_revision| PrefixHead {
            keys,
            newest_mod_revision,
            revision: 20,
        };
        // Listed at 10, /p/a last written at 7: nothing newer.
        assert_eq!(mirror.lacks(read(1, 7)), None);
        // A put the watch has not delivered.
        assert_eq!(mirror.lacks(read(1, 12)), Some(12));
        assert_eq!(mirror.lacks(read(2, 12)), Some(12));
        // A delete alone: same newest revision, one key fewer.
        assert_eq!(mirror.lacks(read(0, 0)), Some(11));
        // Once delivered, the same reads are explained.
        mirror.apply(&[put("/p/b", b"2", 12)]);
        assert_eq!(mirror.lacks(read(2, 12)), None);
        mirror.apply(&[event(1, b"/p/a", b"", 13), event(1, b"/p/b", b"", 13)]);
        assert_eq!(mirror.lacks(read(0, 0)), None);
        // Keys JSON cannot carry count too.
        mirror.apply(&[put("/p/c", b"\xff", 14)]);
        assert_eq!(mirror.lacks(read(1, 14)), None);
    }

    /// A mirror of prefix `/p/` that listed `/p/a` = `1` at revision 10 and published it.
    fn published_a_at_10() -> Mirror {
        let mut mirror = Mirror::new("/p/", None);
        let mut listing = Listing {
            revision: 10,
            ..Listing::default()
        };
        listing.insert(b"/p/a", b"1", 5);
        mirror.replace(listing);
        mirror.mark_published();
        mirror
    }

    #[test]
    fn events_advance_the_state_and_the_revision() {
        let mut mirror = published_a_at_10();

        let applied = mirror.apply(&[put("/p/b", b"2", 11), event(1, b"/p/a", b"", 12)]);
        assert_eq!(
            applied,
            Applied {
                stale_events: 0,
                changed: true
            }
        );
        assert_eq!(mirror.revision(), 12);
        assert!(mirror.is_dirty());
        assert_eq!(mirror.snapshot().kvs.keys().collect::<Vec<_>>(), ["/p/b"]);
    }

    #[test]
    fn old_events_are_skipped_and_same_values_change_nothing() {
        let mut mirror = published_a_at_10();

        let applied = mirror.apply(&[put("/p/a", b"old", 9), put("/p/a", b"1", 11)]);
        assert_eq!(
            applied,
            Applied {
                stale_events: 1,
                changed: false
            }
        );
        assert_eq!(mirror.snapshot().kvs["/p/a"], "1");
        assert_eq!(mirror.revision(), 11);
        assert!(!mirror.is_dirty());
    }

    #[test]
    fn values_json_cannot_carry_are_set_aside() {
        let mut mirror = Mirror::new("/p/", None);
        mirror.replace(Listing {
            revision: 1,
            ..Listing::default()
        });
        mirror.apply(&[put("/p/a", b"ok", 2)]);
        mirror.apply(&[put("/p/a", b"\xff", 3)]);
        assert!(!mirror.snapshot().kvs.contains_key("/p/a"));
        assert_eq!(mirror.unrepresentable_keys(), 1);
        mirror.apply(&[event(1, b"/p/a", b"", 4)]);
        assert_eq!(mirror.unrepresentable_keys(), 0);
    }

    #[test]
    fn a_relist_with_the_published_keys_is_not_a_change() {
        let mut published = Snapshot::new(5, "/p/");
        published.kvs.insert("/p/a".into(), "1".into());
        let mut mirror = Mirror::new("/p/", Some(published.clone()));
        assert!(!mirror.is_dirty());
        let mut listing = Listing {
            revision: 9,
            ..Listing::default()
        };
        listing.insert(b"/p/a", b"1", 5);
        mirror.replace(listing);
        assert!(!mirror.is_dirty());
        assert_eq!(mirror.revision(), 9);

        let other_prefix = Mirror::new("/q/", Some(published.clone()));
        assert!(other_prefix.is_dirty());
    }
}
