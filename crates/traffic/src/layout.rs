//! The fixed layout of a counter file, in 64-bit words (native byte order; the file
//! never leaves the node). Every size and offset is a constant: a reader checks the
//! header against them and never takes a length from the file.
//!
//! ```text
//! header    HEADER_WORDS words   magic, version, the bounds, label count, unslotted
//! index     INDEX_BUCKETS words  label-set hash index: id + 1 per bucket, 0 empty
//! entries   MAX_LABEL_SETS * ENTRY_WORDS words  one label set each
//! slots     MAX_SLOTS * SLOT_WORDS words   one per worker: owner, claims, pending
//!           count, counts, then its pending label sets (PENDING_LABEL_SETS entries)
//! ```

/// The file's first word: `DWANSWR1`.
pub const MAGIC: u64 = u64::from_le_bytes(*b"DWANSWR1");
/// The layout's version, which a writer creates a file with: 3, whose entries' kind byte
/// may be 2 (bucket). Version 2 is the same layout whose byte was `sticky` (0 or 1).
pub const VERSION: u64 = 3;
/// The versions a reader takes (and a writer adopts a file of): 2 and 3. Any other is
/// refused. A reader from before version 3 takes 2 only, so it refuses a version-3 file
/// by its header, whole: its counts are left out, never misread (docs/traffic.md,
/// "Upgrading").
pub const READ_VERSIONS: [u64; 2] = [2, VERSION];

/// How many distinct label sets a file registers. Past it, answers count in the
/// overflow counter.
pub const MAX_LABEL_SETS: usize = 4096;
/// How many workers may hold a slot at once (a slot is freed when its worker dies).
/// Past it, answers count in the unslotted counter (part of the overflow).
pub const MAX_SLOTS: usize = 256;
/// The longest label value kept, in bytes (geo, key, origin, shard); a longer one is
/// cut and ends in `~`.
pub const MAX_LABEL_BYTES: usize = 128;

/// How many label sets a worker keeps in its own slot while the registry is busy (its
/// lock held by another process): counted there, against their labels, never moved. Past
/// it, and until the registry can be taken, answers count in the slot's overflow counter.
pub const PENDING_LABEL_SETS: usize = 8;

/// Header words.
pub const HEADER_WORDS: usize = 16;
/// Word indexes in the header (their names say what each holds).
#[allow(missing_docs)]
pub mod header {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 1;
    pub const MAX_LABEL_SETS: usize = 2;
    pub const MAX_SLOTS: usize = 3;
    pub const MAX_LABEL_BYTES: usize = 4;
    /// Label sets registered (published with release after the entry is written).
    pub const LABEL_COUNT: usize = 5;
    /// Answers counted by a worker that found no free slot (atomic add, cold path).
    pub const UNSLOTTED: usize = 6;
    /// The pid of the last process that created or adopted the file (its tree's root).
    pub const TREE_PID: usize = 7;
    /// How many process trees have opened the file.
    pub const TREES: usize = 8;
}

/// Checks the header words that fix the layout (magic, a version of `versions` and the
/// three bounds), each read through `word`: the writer reads its mapping, the reader a
/// copy of the bytes. Returns the file's version.
pub(crate) fn check_header(
    word: impl Fn(usize) -> u64,
    versions: &[u64],
) -> Result<u64, crate::error::Error> {
    let version = word(header::VERSION);
    if word(header::MAGIC) == MAGIC && !versions.contains(&version) {
        return Err(crate::error::Error::Header("version"));
    }
    let fixed = [
        (header::MAGIC, MAGIC, "magic"),
        (header::MAX_LABEL_SETS, MAX_LABEL_SETS as u64, "label sets"),
        (header::MAX_SLOTS, MAX_SLOTS as u64, "slots"),
        (
            header::MAX_LABEL_BYTES,
            MAX_LABEL_BYTES as u64,
            "label bytes",
        ),
    ];
    match fixed
        .into_iter()
        .find(|&(index, want, _)| word(index) != want)
    {
        Some((_, _, name)) => Err(crate::error::Error::Header(name)),
        None => Ok(version),
    }
}

/// Buckets of the label-set index (twice the label sets, so probes stay short).
pub const INDEX_BUCKETS: usize = 2 * MAX_LABEL_SETS;
/// Words of one label-set entry: one word of lengths and codes, then four values.
pub const ENTRY_WORDS: usize = 1 + 4 * MAX_LABEL_BYTES / 8;
/// Words of a slot's own header (owner pid, claims, pending label sets, reserved).
pub const SLOT_HEADER_WORDS: usize = 4;
/// Word indexes in a slot's header.
#[allow(missing_docs)]
pub mod slot_header {
    pub const OWNER: usize = 0;
    pub const CLAIMS: usize = 1;
    /// Pending label sets written in the slot (published with release after the entry).
    pub const PENDING: usize = 2;
}
/// Counters of one slot: a counter per label set, its overflow counter, then a counter
/// per pending label set.
pub const SLOT_COUNTERS: usize = MAX_LABEL_SETS + 1 + PENDING_LABEL_SETS;
/// Words of one slot: its header, its counters, then its pending label-set entries.
pub const SLOT_WORDS: usize = SLOT_HEADER_WORDS + SLOT_COUNTERS + PENDING_LABEL_SETS * ENTRY_WORDS;
/// Word index of the overflow counter inside a slot's counters (label id past the last).
pub const OVERFLOW_ID: u32 = MAX_LABEL_SETS as u32;
/// The id of a slot's first pending label set (the next ones follow): ids past
/// [`OVERFLOW_ID`] belong to the slot that counts under them, never to the file.
pub const FIRST_PENDING_ID: u32 = OVERFLOW_ID + 1;

/// Where the index starts.
pub const INDEX_OFFSET: usize = HEADER_WORDS;
/// Where the entries start.
pub const ENTRIES_OFFSET: usize = INDEX_OFFSET + INDEX_BUCKETS;
/// Where the slots start.
pub const SLOTS_OFFSET: usize = ENTRIES_OFFSET + MAX_LABEL_SETS * ENTRY_WORDS;
/// Words in a file.
pub const FILE_WORDS: usize = SLOTS_OFFSET + MAX_SLOTS * SLOT_WORDS;
/// Bytes in a file (a reader refuses any other size).
pub const FILE_BYTES: usize = FILE_WORDS * 8;

/// The first word of slot `slot`.
pub const fn slot_offset(slot: usize) -> usize {
    SLOTS_OFFSET + slot * SLOT_WORDS
}

/// The first word of pending entry `index` of slot `slot`.
pub const fn pending_entry_offset(slot: usize, index: usize) -> usize {
    slot_offset(slot) + SLOT_HEADER_WORDS + SLOT_COUNTERS + index * ENTRY_WORDS
}

/// The first word of entry `id`.
pub const fn entry_offset(id: usize) -> usize {
    ENTRIES_OFFSET + id * ENTRY_WORDS
}
