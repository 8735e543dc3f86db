//! The reader opens the configured users' files by name (issue 40, findings 2 and 4): a
//! forged file of another user is not served, and no number of decoys or junk names hides
//! a user's file. Where a per-user directory exists the file is there, and a directory
//! another user could write is refused. (The tests run as root in the devenv, which lets
//! them make files of other users.)

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use dw_traffic::{
    Counters, FILE_MODE, FileState, LabelSet, MappedFile, ProcessLocks, Step, count, file_name,
    locate, parse, read_directory, read_users, user_dir, words_to_bytes, zeroed_words,
};

/// A valid counter file with `answers` answers of one label set for `geo`.
fn file_with(geo: &[u8], answers: u64) -> Vec<u8> {
    let words = zeroed_words();
    let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
    let slot = counters.claim_slot(1).unwrap();
    let id = counters.label_id(&de(geo));
    for _ in 0..answers {
        count(counters.slot_counters(slot), id);
    }
    words_to_bytes(&words)
}

fn de(geo: &[u8]) -> LabelSet {
    LabelSet::new(geo, Step::Country, geo, b"fra-a", b"eu-1", false)
}

/// Writes `bytes` (sparsely) at `path`, owned by `uid`.
fn write_owned(path: &Path, uid: u32, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::create(path).unwrap();
    file.set_len(bytes.len() as u64).unwrap();
    for (page, chunk) in bytes.chunks(4096).enumerate() {
        if chunk.iter().any(|&b| b != 0) {
            file.write_all_at(chunk, (page * 4096) as u64).unwrap();
        }
    }
    std::os::unix::fs::chown(path, Some(uid), None).expect("chown (run as root, in the devenv)");
}

/// A directory every user can write, as `/run/dw-router-answers` was (1777).
fn shared_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

const PHP_USER: u32 = 33;
const ATTACKER: u32 = 1001;

#[test]
fn a_forged_file_of_another_user_is_not_served() {
    let dir = shared_dir();
    // The attacker's own file, growing DE by millions, and a file it made first under the
    // PHP user's name (the /run tmpfs pre-creation).
    write_owned(
        &dir.path().join(file_name(ATTACKER)),
        ATTACKER,
        &file_with(b"DE", 5_000_000),
    );
    write_owned(
        &dir.path().join(file_name(PHP_USER)),
        ATTACKER,
        &file_with(b"DE", 7),
    );
    let found = read_users(dir.path(), &[0, PHP_USER]);
    assert!(found.totals.series.is_empty(), "{:?}", found.totals);
    assert_eq!(found.files.len(), 2);
    assert_eq!(found.files[0].2, FileState::Missing, "root's: not there");
    match &found.files[1].2 {
        FileState::Refused(why) => assert!(
            why.to_string().contains("owned by uid 1001, not by uid 33"),
            "{why}"
        ),
        other => panic!("the forged file must be refused, not {other:?}"),
    }
    // A scan of the directory (as before) served the attacker's own file.
    assert_eq!(
        read_directory(dir.path()).totals.series.get(&de(b"DE")),
        Some(&5_000_000)
    );
}

#[test]
fn decoy_files_do_not_hide_a_configured_user() {
    let dir = shared_dir();
    let nobody = 65534;
    write_owned(
        &dir.path().join(file_name(nobody)),
        nobody,
        &file_with(b"FR", 3),
    );
    // answers-0.bin ... answers-63.bin, made by another user: they sort first.
    for uid in 0..64 {
        write_owned(
            &dir.path().join(file_name(uid)),
            ATTACKER,
            &file_with(b"DE", 1),
        );
    }
    let found = read_users(dir.path(), &[nobody]);
    assert_eq!(found.totals.series.get(&de(b"FR")), Some(&3));
    assert_eq!(
        found.files,
        [(nobody, dir.path().join(file_name(nobody)), FileState::Read)]
    );
    // A scan of the directory (as before) lost it behind the decoys.
    assert_eq!(
        read_directory(dir.path()).totals.series.get(&de(b"FR")),
        None
    );
}

#[test]
fn junk_files_do_not_hide_a_configured_user() {
    let dir = shared_dir();
    let nobody = 65534;
    write_owned(
        &dir.path().join(file_name(nobody)),
        nobody,
        &file_with(b"FR", 4),
    );
    for n in 0..4_200 {
        std::fs::File::create(dir.path().join(format!("junk-{n}"))).unwrap();
    }
    let found = read_users(dir.path(), &[nobody]);
    assert_eq!(found.totals.series.get(&de(b"FR")), Some(&4));
    assert_eq!(found.files[0].2, FileState::Read);
}

#[test]
fn the_per_user_directory_is_used_when_it_exists_and_refused_if_others_can_write_it() {
    let dir = tempfile::tempdir().unwrap();
    let own = user_dir(dir.path(), PHP_USER);
    assert_eq!(
        locate(dir.path(), PHP_USER).unwrap(),
        dir.path().join(file_name(PHP_USER)),
        "no per-user directory: the file beside the others"
    );
    std::fs::create_dir(&own).unwrap();
    std::os::unix::fs::chown(&own, Some(PHP_USER), None).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o2750)).unwrap();
    assert_eq!(
        locate(dir.path(), PHP_USER).unwrap(),
        own.join(file_name(PHP_USER))
    );
    write_owned(
        &own.join(file_name(PHP_USER)),
        PHP_USER,
        &file_with(b"JP", 2),
    );
    let found = read_users(dir.path(), &[PHP_USER]);
    assert_eq!(found.totals.series.get(&de(b"JP")), Some(&2));
    // Writable by others: refused, it could have been replaced.
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o777)).unwrap();
    let found = read_users(dir.path(), &[PHP_USER]);
    assert!(found.totals.series.is_empty());
    assert!(
        matches!(&found.files[0].2, FileState::Refused(why) if why.to_string().contains("writable by others"))
    );
    // Made by another user (in a parent every user can write): refused.
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&own, Some(ATTACKER), None).unwrap();
    let found = read_users(dir.path(), &[PHP_USER]);
    assert!(
        matches!(&found.files[0].2, FileState::Refused(why) if why.to_string().contains("owned by uid 1001"))
    );
    // Missing file in a good directory: missing, not refused.
    std::os::unix::fs::chown(&own, Some(0), None).unwrap();
    std::fs::remove_file(own.join(file_name(PHP_USER))).unwrap();
    let found = read_users(dir.path(), &[PHP_USER]);
    assert_eq!(found.files[0].2, FileState::Missing);
}

#[test]
fn more_users_than_the_bound_are_refused_each() {
    let dir = tempfile::tempdir().unwrap();
    let uids: Vec<u32> = (2000..2000 + dw_traffic::MAX_FILES as u32 + 1).collect();
    let found = read_users(dir.path(), &uids);
    assert_eq!(found.files.len(), uids.len());
    assert!(
        found.files[..dw_traffic::MAX_FILES]
            .iter()
            .all(|(_, _, state)| *state == FileState::Missing)
    );
    assert!(
        matches!(&found.files[dw_traffic::MAX_FILES].2, FileState::Refused(why) if why.to_string().contains("more than 64"))
    );
}

/// The writer (here root, as a php-fpm master in MINIT) maps its file in its per-user
/// directory, mode 0640, of the directory's group (set-group-id: the agent's).
#[test]
fn the_writer_makes_its_file_0640_in_its_per_user_directory() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let own = user_dir(dir.path(), uid);
    std::fs::create_dir(&own).unwrap();
    std::os::unix::fs::chown(&own, Some(uid), Some(4242)).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o2750)).unwrap();
    let file = MappedFile::open(dir.path()).unwrap();
    assert_eq!(file.path(), own.join(file_name(uid)));
    let meta = std::fs::metadata(file.path()).unwrap();
    assert_eq!(meta.mode() & 0o7777, FILE_MODE);
    assert_eq!(meta.gid(), 4242, "the directory's group, for the agent");
    parse(&words_to_bytes(file.words())).expect_err("not opened by Counters yet: no header");
    // A file made 0644 before is made 0640.
    let flat = tempfile::tempdir().unwrap();
    let path = flat.path().join(file_name(uid));
    std::fs::File::create(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    MappedFile::open(flat.path()).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, FILE_MODE);
    // A per-user directory others can write: refused, counting off.
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o2777)).unwrap();
    let error = MappedFile::open(dir.path()).unwrap_err();
    assert!(error.to_string().contains("writable by others"), "{error}");
}
