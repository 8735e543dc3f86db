//! A label set (`geo`, `step`, `key`, `origin`, `shard`, `kind`) and its entry in the
//! file: one word of lengths and codes, then the four values, each in a fixed field of
//! [`MAX_LABEL_BYTES`] bytes.

use crate::error::Error;
use crate::layout::{ENTRY_WORDS, MAX_LABEL_BYTES};

/// Where in the routing chain an answer came from: `explain()`'s step names, and
/// `fail_open` for the configured fallback route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    /// The visitor's own `CC-SUB` region.
    Subdivision,
    /// The country's region.
    Country,
    /// The continent bucket.
    Continent,
    /// An opaque geo's own region.
    Geo,
    /// `policy.default`.
    Default,
    /// A `policy.failover` entry.
    Failover,
    /// No region answered: the ini fallback route.
    FailOpen,
}

impl Step {
    /// Every step, in code order.
    pub const ALL: [Step; 7] = [
        Step::Subdivision,
        Step::Country,
        Step::Continent,
        Step::Geo,
        Step::Default,
        Step::Failover,
        Step::FailOpen,
    ];

    /// Its label value.
    pub fn name(self) -> &'static str {
        match self {
            Step::Subdivision => "subdivision",
            Step::Country => "country",
            Step::Continent => "continent",
            Step::Geo => "geo",
            Step::Default => "default",
            Step::Failover => "failover",
            Step::FailOpen => "fail_open",
        }
    }

    /// The step an `explain()` stage name stands for.
    pub fn from_name(name: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|step| step.name() == name)
    }

    fn code(self) -> u8 {
        self as u8
    }

    fn from_code(code: u8) -> Option<Step> {
        Step::ALL.get(usize::from(code)).copied()
    }
}

/// How the answer was picked: the byte of an entry that was `sticky` (0 or 1) up to
/// layout version 2, and is the kind from version 3 (adding 2, bucket). So a version-2
/// entry reads as plain or sticky, the same answers as it always meant; a version-2 file
/// never holds a bucketed answer (a writer counts those in the overflow there: left
/// out, never misread).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AnswerKind {
    /// Neither a sticky key nor a bucket that applies: the country's answer.
    Plain,
    /// A sticky key was given.
    Sticky,
    /// A visitor bucket picked the origin by the region's assignment.
    Bucket,
}

impl AnswerKind {
    /// Every kind, in code order.
    pub const ALL: [AnswerKind; 3] = [AnswerKind::Plain, AnswerKind::Sticky, AnswerKind::Bucket];

    /// Its label value (`kind="..."`).
    pub fn name(self) -> &'static str {
        match self {
            AnswerKind::Plain => "plain",
            AnswerKind::Sticky => "sticky",
            AnswerKind::Bucket => "bucket",
        }
    }

    /// Its byte in an entry.
    fn code(self) -> u8 {
        self as u8
    }

    /// The kind of an entry's byte in a file of layout `version`: 0 and 1 in every
    /// version, 2 only from version 3.
    fn from_code(code: u8, version: u64) -> Option<AnswerKind> {
        match (code, version) {
            (0, _) => Some(AnswerKind::Plain),
            (1, _) => Some(AnswerKind::Sticky),
            (2, 3..) => Some(AnswerKind::Bucket),
            _ => None,
        }
    }
}

/// `true` is a sticky answer, `false` a plain one (the label before kinds).
impl From<bool> for AnswerKind {
    fn from(sticky: bool) -> AnswerKind {
        if sticky {
            AnswerKind::Sticky
        } else {
            AnswerKind::Plain
        }
    }
}

/// One label set. Values are bytes; [`LabelSet::new`] cuts each to
/// [`MAX_LABEL_BYTES`] (ending it in `~`) so that it fits its field.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LabelSet {
    /// The geo as counted: a built-in country code, a key of the table, `empty`, `other`.
    pub geo: Vec<u8>,
    /// The chain's step that answered.
    pub step: Step,
    /// The answering region's key, escaped as cache tags are; empty for fail-open.
    pub key: Vec<u8>,
    /// The origin answered.
    pub origin: Vec<u8>,
    /// The shard answered.
    pub shard: Vec<u8>,
    /// How the origin was picked: plain, sticky or bucket.
    pub kind: AnswerKind,
}

/// Cuts `value` to [`MAX_LABEL_BYTES`], the last byte of a cut one being `~`.
pub fn bounded(value: &[u8]) -> Vec<u8> {
    if value.len() <= MAX_LABEL_BYTES {
        return value.to_vec();
    }
    let mut cut = value[..MAX_LABEL_BYTES - 1].to_vec();
    cut.push(b'~');
    cut
}

impl LabelSet {
    /// A label set, each value cut to fit.
    pub fn new(
        geo: &[u8],
        step: Step,
        key: &[u8],
        origin: &[u8],
        shard: &[u8],
        kind: impl Into<AnswerKind>,
    ) -> LabelSet {
        LabelSet {
            geo: bounded(geo),
            step,
            key: bounded(key),
            origin: bounded(origin),
            shard: bounded(shard),
            kind: kind.into(),
        }
    }

    fn values(&self) -> [&[u8]; 4] {
        [&self.geo, &self.key, &self.origin, &self.shard]
    }

    /// The entry's words. Values longer than the field are cut here too, so any
    /// `LabelSet` encodes.
    pub(crate) fn encode(&self) -> [u64; ENTRY_WORDS] {
        let mut bytes = [0u8; ENTRY_WORDS * 8];
        let mut head = [0u8; 8];
        for (index, value) in self.values().into_iter().enumerate() {
            let len = value.len().min(MAX_LABEL_BYTES);
            head[index] = len as u8;
            let start = 8 + index * MAX_LABEL_BYTES;
            bytes[start..start + len].copy_from_slice(&value[..len]);
        }
        head[4] = self.step.code();
        head[5] = self.kind.code();
        bytes[..8].copy_from_slice(&head);
        let mut words = [0u64; ENTRY_WORDS];
        for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
            *word = u64::from_ne_bytes(chunk.try_into().unwrap_or([0; 8]));
        }
        words
    }

    /// The label set of an entry's words in a file of layout `version` (2 or 3); an error
    /// for lengths past their field or an unknown code, a kind code included (the file
    /// is not trusted).
    pub(crate) fn decode(words: &[u64], version: u64) -> Result<LabelSet, Error> {
        if words.len() != ENTRY_WORDS {
            return Err(Error::Entry("entry of the wrong size"));
        }
        let mut bytes = Vec::with_capacity(ENTRY_WORDS * 8);
        for word in words {
            bytes.extend_from_slice(&word.to_ne_bytes());
        }
        let head = &bytes[..8];
        let mut values: [Vec<u8>; 4] = Default::default();
        for (index, value) in values.iter_mut().enumerate() {
            let len = usize::from(head[index]);
            if len > MAX_LABEL_BYTES {
                return Err(Error::Entry("label value longer than its field"));
            }
            let start = 8 + index * MAX_LABEL_BYTES;
            *value = bytes[start..start + len].to_vec();
        }
        let step = Step::from_code(head[4]).ok_or(Error::Entry("unknown step code"))?;
        let kind = AnswerKind::from_code(head[5], version).ok_or(Error::Entry(
            "unknown kind code (0 plain, 1 sticky; 2 bucket from layout 3)",
        ))?;
        if head[6] != 0 || head[7] != 0 {
            return Err(Error::Entry("reserved bytes are not zero"));
        }
        let [geo, key, origin, shard] = values;
        Ok(LabelSet {
            geo,
            step,
            key,
            origin,
            shard,
            kind,
        })
    }

    /// FNV-1a over the entry's words: the index's hash.
    pub(crate) fn hash_words(words: &[u64; ENTRY_WORDS]) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for word in words {
            hash ^= *word;
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            hash ^= hash >> 29;
        }
        hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::VERSION;

    #[test]
    fn round_trips_and_cuts_at_the_edge() {
        let exact = vec![b'k'; MAX_LABEL_BYTES];
        let over = vec![b'k'; MAX_LABEL_BYTES + 1];
        let set = LabelSet::new(b"DE", Step::Country, &exact, &over, b"eu-1", true);
        assert_eq!(set.key, exact);
        assert_eq!(set.origin.len(), MAX_LABEL_BYTES);
        assert_eq!(set.origin.last(), Some(&b'~'));
        let decoded = LabelSet::decode(&set.encode(), VERSION).expect("decodes");
        assert_eq!(decoded, set);
    }

    #[test]
    fn kinds_round_trip_and_bucket_needs_layout_3() {
        for kind in AnswerKind::ALL {
            let set = LabelSet::new(b"DE", Step::Country, b"DE", b"fra-a", b"eu-1", kind);
            assert_eq!(LabelSet::decode(&set.encode(), 3).map(|s| s.kind), Ok(kind));
        }
        assert_eq!(AnswerKind::from(true), AnswerKind::Sticky);
        assert_eq!(AnswerKind::from(false), AnswerKind::Plain);
        // An old file's 0 and 1 mean what they always meant.
        for kind in [AnswerKind::Plain, AnswerKind::Sticky] {
            let set = LabelSet::new(b"DE", Step::Country, b"DE", b"fra-a", b"eu-1", kind);
            assert_eq!(LabelSet::decode(&set.encode(), 2).map(|s| s.kind), Ok(kind));
        }
        // A 2 in a layout-2 file, and a 3 in any, are malformed: never read as a kind.
        let bucket = LabelSet::new(
            b"DE",
            Step::Country,
            b"DE",
            b"fra-a",
            b"eu-1",
            AnswerKind::Bucket,
        );
        assert!(LabelSet::decode(&bucket.encode(), 2).is_err());
        let mut words = bucket.encode();
        let mut head = words[0].to_ne_bytes();
        head[5] = 3;
        words[0] = u64::from_ne_bytes(head);
        assert!(LabelSet::decode(&words, 3).is_err());
    }

    #[test]
    fn every_step_round_trips() {
        for step in Step::ALL {
            let set = LabelSet::new(b"", step, b"", b"", b"", false);
            assert_eq!(
                LabelSet::decode(&set.encode(), VERSION).map(|s| s.step),
                Ok(step)
            );
            assert_eq!(Step::from_name(step.name()), Some(step));
        }
    }
}
