//! Visitor buckets (docs/routing.md, "Buckets"): a region's N buckets, each given to one of
//! its listed origins, so that weights split a country's visitors while each visitor (who
//! keeps its bucket in a cookie) stays on one origin. Not to be confused with the continent
//! buckets (`region/continent/<CODE>`) of the fallback chain.
//!
//! - [`apportion`]: how many of the N buckets each origin gets: the largest-remainder
//!   (Hamilton) method on the listed weights, exactly N in all, ties to the origin listed
//!   first.
//! - [`Assignment`]: which origin each bucket goes to, held as runs (4 bytes a run).
//! - [`default_assignment`]: the assignment a value written without one gets: the
//!   apportioned counts as contiguous blocks in list order.
//! - [`reassign`] / [`reassign_by_name`]: the next assignment after a change of weights or
//!   origins, moving the fewest buckets possible, by a stated deterministic rule.
//! - [`Assignment::encode`] / [`Assignment::decode`]: the text kept in (or beside) the
//!   region value, `ORIGIN:COUNT` runs, read as hostile input.
//!
//! `php/Buckets.php` is the same code for the userland twin; both are held to
//! `crates/routing/tests/bucket-cases.json`. Nothing here is wired into [`crate::Table`]
//! yet.

use std::collections::HashMap;

use crate::{Error, quoted};

/// The fewest buckets `policy/global`'s `buckets` may ask for.
pub const MIN_BUCKETS: u16 = 2;
/// The most buckets `policy/global`'s `buckets` may ask for.
pub const MAX_BUCKETS: u16 = 1024;
/// The most listed origins a bucketed region may have: an assignment keeps an origin's
/// index in 16 bits.
pub const MAX_ASSIGNED_ORIGINS: usize = 1 << 16;
/// The longest encoded assignment [`Assignment::decode`] reads: every canonical encoding
/// fits, the longest being 1,024 runs of one bucket each naming five-digit origins
/// (`12345:1,` is 8 bytes, less the last comma).
pub const MAX_ENCODED_BYTES: usize = 8 * MAX_BUCKETS as usize - 1;
/// The most digits a number of an encoded run has: no origin index (below 65,536) nor
/// count (at most 1,024) needs more.
const MAX_RUN_DIGITS: usize = 5;

/// A number of buckets N, from [`MIN_BUCKETS`] to [`MAX_BUCKETS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BucketCount(u16);

impl BucketCount {
    /// `n` when it is from 2 to 1024; otherwise a policy error on the field `buckets`.
    pub fn new(n: i64) -> Result<BucketCount, Error> {
        match u16::try_from(n) {
            Ok(n) if (MIN_BUCKETS..=MAX_BUCKETS).contains(&n) => Ok(BucketCount(n)),
            _ => Err(Error::Policy {
                field: "buckets",
                reason: format!("is {n}, not an integer from {MIN_BUCKETS} to {MAX_BUCKETS}"),
            }),
        }
    }

    /// N.
    pub fn get(self) -> u16 {
        self.0
    }
}

/// How many of the `n` buckets each origin gets, in the order of `weights` (the listed
/// origins' weights, in list order): the largest-remainder method. Origin `i`'s quota is
/// `w_i * n / S` (S the sum of the weights); each gets the integer part, and the buckets
/// left over go one each to the largest remainders `w_i * n mod S`, equal remainders to the
/// origin listed first. All in integers: the counts sum to exactly `n`, each is its quota
/// rounded down or up, and a weight of 0 gets 0.
///
/// Errors: no positive weight (field `weight`), more than [`MAX_ASSIGNED_ORIGINS`]
/// weights (field `origins`).
///
/// ```
/// use dw_routing::buckets::{BucketCount, apportion};
///
/// let n = BucketCount::new(10)?;
/// assert_eq!(apportion(&[50, 30, 20], n)?, [5, 3, 2]);
/// // Quotas 3.33 each: one bucket left over, to the first of the equal remainders.
/// assert_eq!(apportion(&[1, 1, 1], n)?, [4, 3, 3]);
/// # Ok::<(), dw_routing::Error>(())
/// ```
pub fn apportion(weights: &[u32], n: BucketCount) -> Result<Vec<u16>, Error> {
    if weights.len() > MAX_ASSIGNED_ORIGINS {
        return Err(region_error(
            "origins",
            format!(
                "lists {} origins; a bucketed region lists at most {MAX_ASSIGNED_ORIGINS}",
                weights.len()
            ),
        ));
    }
    let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if sum == 0 {
        return Err(region_error(
            "weight",
            "no listed origin has a positive weight".into(),
        ));
    }
    let n64 = u64::from(n.get());
    let mut counts = Vec::with_capacity(weights.len());
    let mut remainders = Vec::with_capacity(weights.len());
    let mut given = 0u64;
    for (index, &weight) in weights.iter().enumerate() {
        // At most 2^32 * 1024 / 1 < 2^43: no overflow; the quota is at most n.
        let scaled = u64::from(weight) * n64;
        let quota = scaled / sum;
        given += quota;
        counts.push(quota as u16);
        remainders.push((scaled % sum, index));
    }
    // Largest remainder first, then the origin listed first: a total order, so the sort
    // is the same whatever the algorithm.
    remainders.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    // The remainders sum to (n - given) * S and each is below S: at least n - given of
    // them are positive, so the leftover buckets never reach a weight of 0.
    for &(_, index) in remainders.iter().take((n64 - given) as usize) {
        counts[index] += 1;
    }
    Ok(counts)
}

/// One run of an [`Assignment`]: the buckets from the previous run's end up to `end`
/// (exclusive) go to the origin of index `origin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    end: u16,
    origin: u16,
}

/// Which listed origin (by index in the region's `origins`) each of N buckets goes to.
///
/// Held as runs of consecutive buckets with one origin: `16 + 4 × runs` bytes (the boxed
/// slice's pointer and length, then 4 bytes a run), at most `16 + 4 × N` (4,112 bytes at
/// N = 1024). A [`default_assignment`] has one run per origin with a bucket;
/// [`reassign`] pulls buckets toward the new value's default blocks, so drains, restores
/// and sheds keep the runs few (docs/routing.md, "Buckets", gives measured counts).
/// [`Assignment::origin_of`] is a binary search over the runs, without allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Non-empty, ends strictly increasing, the last end N; no two neighbours share an
    /// origin (so equal assignments have equal runs).
    runs: Box<[Run]>,
}

impl Assignment {
    /// The assignment of `owners[b]` to each bucket `b` (at least one bucket).
    fn from_owners(owners: &[u16]) -> Assignment {
        let mut runs: Vec<Run> = Vec::new();
        for (bucket, &origin) in owners.iter().enumerate() {
            let end = (bucket + 1) as u16;
            match runs.last_mut() {
                Some(run) if run.origin == origin => run.end = end,
                _ => runs.push(Run { end, origin }),
            }
        }
        Assignment {
            runs: runs.into_boxed_slice(),
        }
    }

    /// N, the number of buckets.
    pub fn buckets(&self) -> u16 {
        self.runs.last().map_or(0, |run| run.end)
    }

    /// The index (in the region's `origins`) of the origin bucket `bucket` goes to; `None`
    /// when `bucket` is not below N.
    pub fn origin_of(&self, bucket: u16) -> Option<u16> {
        let index = self.runs.partition_point(|run| run.end <= bucket);
        self.runs.get(index).map(|run| run.origin)
    }

    /// Each bucket's origin index, bucket 0 first.
    pub fn owners(&self) -> Vec<u16> {
        let mut owners = Vec::with_capacity(usize::from(self.buckets()));
        let mut start = 0u16;
        for run in self.runs.iter() {
            owners.extend(std::iter::repeat_n(
                run.origin,
                usize::from(run.end - start),
            ));
            start = run.end;
        }
        owners
    }

    /// How many buckets each of `origin_count` origins has (an index at or past
    /// `origin_count` is not counted).
    pub fn counts(&self, origin_count: usize) -> Vec<u16> {
        let mut counts = vec![0u16; origin_count];
        let mut start = 0u16;
        for run in self.runs.iter() {
            if let Some(count) = counts.get_mut(usize::from(run.origin)) {
                *count += run.end - start;
            }
            start = run.end;
        }
        counts
    }

    /// How many runs hold the assignment.
    pub fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// The bytes this assignment holds on the heap: 4 a run.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.runs)
    }

    /// The text form: the runs in bucket order, `ORIGIN:COUNT` each (the origin's index in
    /// the region's `origins`, the run's number of buckets, both in decimal without
    /// leading zeros), joined by `,`; neighbours never share an origin, so an assignment
    /// has exactly one spelling. At most [`MAX_ENCODED_BYTES`] bytes.
    ///
    /// ```
    /// use dw_routing::buckets::{BucketCount, default_assignment};
    ///
    /// let assignment = default_assignment(&[50, 30, 20], BucketCount::new(10)?)?;
    /// assert_eq!(assignment.encode(), "0:5,1:3,2:2");
    /// # Ok::<(), dw_routing::Error>(())
    /// ```
    pub fn encode(&self) -> String {
        let mut text = String::with_capacity(self.runs.len() * 6);
        let mut start = 0u16;
        for run in self.runs.iter() {
            if start > 0 {
                text.push(',');
            }
            text.push_str(&format!("{}:{}", run.origin, run.end - start));
            start = run.end;
        }
        text
    }

    /// Reads the text form of an assignment of `n` buckets for a region listing
    /// `origin_count` origins, as hostile input: anything but the one canonical spelling
    /// (see [`Assignment::encode`]) of an assignment of exactly `n` buckets to origins below
    /// `origin_count` is refused, as a region error on the field `buckets`. Checked in
    /// this order, which `php/Buckets.php` follows so that both give the same message:
    /// the length (at most [`MAX_ENCODED_BYTES`]), empty, then each run in turn (its
    /// syntax, its origin, its count, an origin like its neighbour's, the running total
    /// past `n`), then the total short of `n`.
    pub fn decode(text: &str, n: BucketCount, origin_count: usize) -> Result<Assignment, Error> {
        let refuse = |reason: String| region_error("buckets", reason);
        if text.len() > MAX_ENCODED_BYTES {
            return Err(refuse(format!(
                "is {} bytes; an encoded assignment is at most {MAX_ENCODED_BYTES}",
                text.len()
            )));
        }
        if text.is_empty() {
            return Err(refuse("is empty".into()));
        }
        let n = n.get();
        let mut runs: Vec<Run> = Vec::new();
        let mut total = 0u32;
        for (index, run) in text.split(',').enumerate() {
            let Some((origin, count)) = run
                .split_once(':')
                .and_then(|(origin, count)| Some((canonical(origin)?, canonical(count)?)))
            else {
                return Err(refuse(format!(
                    "run {index} is not ORIGIN:COUNT (decimal integers of at most \
                     {MAX_RUN_DIGITS} digits, without sign or leading zeros)"
                )));
            };
            if origin as usize >= origin_count {
                return Err(refuse(format!(
                    "run {index} gives origin {origin}; the region lists {origin_count} origins"
                )));
            }
            if count == 0 {
                return Err(refuse(format!("run {index} counts no bucket")));
            }
            if runs
                .last()
                .is_some_and(|last| u32::from(last.origin) == origin)
            {
                return Err(refuse(format!(
                    "run {index} gives origin {origin} as the run before it does: one run"
                )));
            }
            total += count;
            if total > u32::from(n) {
                return Err(refuse(format!(
                    "covers more than the policy's {n} buckets (at run {index})"
                )));
            }
            runs.push(Run {
                end: total as u16,
                origin: origin as u16,
            });
        }
        if total < u32::from(n) {
            return Err(refuse(format!(
                "covers {total} buckets, not the policy's {n}"
            )));
        }
        Ok(Assignment {
            runs: runs.into_boxed_slice(),
        })
    }
}

impl std::fmt::Display for Assignment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.encode())
    }
}

/// A decimal integer of 1 to [`MAX_RUN_DIGITS`] ASCII digits without a leading zero
/// (`0` itself is one).
fn canonical(digits: &str) -> Option<u32> {
    let bytes = digits.as_bytes();
    if bytes.is_empty()
        || bytes.len() > MAX_RUN_DIGITS
        || !bytes.iter().all(u8::is_ascii_digit)
        || (bytes.len() > 1 && bytes[0] == b'0')
    {
        return None;
    }
    digits.parse().ok()
}

/// The assignment a region value without one gets from its listed weights and N: the
/// [`apportion`]ed counts as contiguous blocks in list order (origin 0 the first
/// `counts[0]` buckets, and so on). Errors as [`apportion`].
pub fn default_assignment(weights: &[u32], n: BucketCount) -> Result<Assignment, Error> {
    let counts = apportion(weights, n)?;
    Ok(Assignment::from_owners(&blocks(&counts)))
}

/// Each bucket's origin in the contiguous blocks of `counts`.
fn blocks(counts: &[u16]) -> Vec<u16> {
    let mut owners = Vec::with_capacity(counts.iter().map(|&c| usize::from(c)).sum());
    for (origin, &count) in counts.iter().enumerate() {
        owners.extend(std::iter::repeat_n(origin as u16, usize::from(count)));
    }
    owners
}

/// The assignment after the weights of the same listed origins change (a drain is a
/// weight of 0, a restore the weight back, a shed a smaller weight; an origin appended to
/// the list is a new last weight): the [`apportion`]ed counts for `weights`, reached from
/// `stored` by the fewest moves. The rule (docs/routing.md, "Buckets"):
///
/// 1. `D` is the [`default_assignment`] of `weights`, the target counts its blocks.
/// 2. Each origin above its target frees its surplus: first its buckets that `D` gives to
///    another origin, then the rest, each time the highest bucket first.
/// 3. The freed buckets, lowest first, go to their `D` origin when that origin is below
///    its target; those left, lowest first, to the origins still below their target in
///    list order.
///
/// So the buckets moved are exactly the sum of the origins' decreases (no assignment with
/// the target counts moves fewer), they leave only origins whose count falls and reach
/// only origins whose count rises. From a default assignment, a drain followed by its
/// restore gives every bucket back whenever the drain shrank no other origin; after other
/// changes it need not (the rule keeps no history: a restore pulls toward the default).
///
/// Errors as [`apportion`], and `stored` giving a bucket to an origin index at or past
/// `weights.len()` (field `buckets`).
pub fn reassign(stored: &Assignment, weights: &[u32]) -> Result<Assignment, Error> {
    let counts = apportion(weights, BucketCount(stored.buckets()))?;
    let mut owners: Vec<Option<u16>> = Vec::with_capacity(usize::from(stored.buckets()));
    for origin in stored.owners() {
        if usize::from(origin) >= weights.len() {
            return Err(region_error(
                "buckets",
                format!(
                    "gives a bucket to origin {origin}; the region lists {} origins",
                    weights.len()
                ),
            ));
        }
        owners.push(Some(origin));
    }
    Ok(rebalance(owners, &counts))
}

/// [`reassign`] across a change of the origin list itself: `stored` indexes
/// `stored_origins`, the result indexes `origins` (whose weights are `weights`, in the same
/// order). Each bucket follows its origin by name, so reordering the list moves nothing;
/// the buckets of an origin no longer listed are freed with the surplus (its count falls
/// to 0) and placed by the same rule.
///
/// Errors as [`reassign`], and: `weights` not as long as `origins` (field `weight`), a name
/// listed twice in either list, or `stored` naming an index past `stored_origins` (field
/// `origins`).
pub fn reassign_by_name<S: AsRef<str>>(
    stored: &Assignment,
    stored_origins: &[S],
    origins: &[S],
    weights: &[u32],
) -> Result<Assignment, Error> {
    if weights.len() != origins.len() {
        return Err(region_error(
            "weight",
            format!(
                "gives {} weights for {} origins",
                weights.len(),
                origins.len()
            ),
        ));
    }
    let counts = apportion(weights, BucketCount(stored.buckets()))?;
    let mut new_index: HashMap<&str, u16> = HashMap::with_capacity(origins.len());
    for (index, name) in origins.iter().enumerate() {
        if new_index.insert(name.as_ref(), index as u16).is_some() {
            return Err(listed_twice(name.as_ref()));
        }
    }
    let mut old_names = std::collections::HashSet::with_capacity(stored_origins.len());
    for name in stored_origins {
        if !old_names.insert(name.as_ref()) {
            return Err(listed_twice(name.as_ref()));
        }
    }
    let mut owners: Vec<Option<u16>> = Vec::with_capacity(usize::from(stored.buckets()));
    for origin in stored.owners() {
        let Some(name) = stored_origins.get(usize::from(origin)) else {
            return Err(region_error(
                "origins",
                format!(
                    "the stored assignment gives a bucket to origin {origin}; {} were listed",
                    stored_origins.len()
                ),
            ));
        };
        owners.push(new_index.get(name.as_ref()).copied());
    }
    Ok(rebalance(owners, &counts))
}

fn listed_twice(name: &str) -> Error {
    region_error(
        "origins",
        format!("origin {:?} is listed twice", quoted(name)),
    )
}

/// Steps 2 and 3 of [`reassign`]'s rule: `owners` (None: a bucket whose origin is gone)
/// brought to exactly `counts`.
fn rebalance(mut owners: Vec<Option<u16>>, counts: &[u16]) -> Assignment {
    let default = blocks(counts);
    let mut held = vec![0u16; counts.len()];
    for origin in owners.iter().flatten() {
        held[usize::from(*origin)] += 1;
    }
    let mut surplus: Vec<u16> = held
        .iter()
        .zip(counts)
        .map(|(&h, &c)| h.saturating_sub(c))
        .collect();
    let mut deficit: Vec<u16> = held
        .iter()
        .zip(counts)
        .map(|(&h, &c)| c.saturating_sub(h))
        .collect();
    // Step 2: first the buckets the default gives to another origin, then the rest.
    for keep_home in [false, true] {
        for bucket in (0..owners.len()).rev() {
            if let Some(origin) = owners[bucket] {
                let o = usize::from(origin);
                if surplus[o] > 0 && (default[bucket] == origin) == keep_home {
                    surplus[o] -= 1;
                    owners[bucket] = None;
                }
            }
        }
    }
    // Step 3: to the default's origin where it still lacks buckets, then in list order.
    for (bucket, owner) in owners.iter_mut().enumerate() {
        let home = default[bucket];
        if owner.is_none() && deficit[usize::from(home)] > 0 {
            deficit[usize::from(home)] -= 1;
            *owner = Some(home);
        }
    }
    let mut next = 0usize;
    for owner in owners.iter_mut().filter(|owner| owner.is_none()) {
        while deficit[next] == 0 {
            next += 1;
        }
        deficit[next] -= 1;
        *owner = Some(next as u16);
    }
    let owners: Vec<u16> = owners.into_iter().flatten().collect();
    Assignment::from_owners(&owners)
}

/// Where a region's [`effective_assignment`] comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssignmentSource {
    /// The value's `buckets`, as stored: it decodes for (N, the listed origins) and gives
    /// each origin its apportioned count of the current weights.
    Stored,
    /// The value's `buckets` decodes, but its counts are not the apportionment of the
    /// current weights (a weight changed without the assignment, by hand or by an older
    /// `dwctl`): [`reassign`]ed to them, moving the fewest buckets, as the next `dwctl`
    /// change would. A drained origin so never keeps a bucket.
    Reassigned,
    /// The value has no `buckets`: the [`default_assignment`] of its weights.
    Default,
    /// The value's `buckets` does not decode for (N, the listed origins): written for
    /// another N, not a string, or not a canonical assignment. Ignored (the value still
    /// routes; its plain and sticky answers never read it), and the default used.
    DefaultStoredIgnored(Error),
}

/// The assignment a region answers its visitors' buckets with when the table's policy
/// has N buckets: from `stored` (the value's `buckets` field: `Ok(text)` for a string,
/// `Err(kind)` for another JSON type, `None` when absent), the listed origins' `weights`
/// (in list order) and `n`. The extension, the twin, `dwctl route` and `dwctl`'s changes
/// all start from this one (a change [`reassign`]s it), so that they agree:
///
/// - absent: the [`default_assignment`];
/// - a string that [`Assignment::decode`]s for `n` and `weights.len()` origins: itself
///   when its counts are the [`apportion`]ment of `weights`, else [`reassign`]ed to it
///   ([`AssignmentSource::Reassigned`]);
/// - anything else: the default, with the reason it was ignored.
///
/// Errors as [`apportion`] (more than [`MAX_ASSIGNED_ORIGINS`] origins: the region has
/// no assignment, and its visitors' buckets are not used).
pub fn effective_assignment(
    stored: Option<Result<&str, &str>>,
    weights: &[u32],
    n: BucketCount,
) -> Result<(Assignment, AssignmentSource), Error> {
    let counts = apportion(weights, n)?;
    let decoded = match stored {
        None => None,
        Some(Ok(text)) => Some(Assignment::decode(text, n, weights.len())),
        Some(Err(kind)) => Some(Err(region_error(
            "buckets",
            format!("is {kind}, not a string"),
        ))),
    };
    Ok(match decoded {
        None => (
            Assignment::from_owners(&blocks(&counts)),
            AssignmentSource::Default,
        ),
        Some(Err(error)) => (
            Assignment::from_owners(&blocks(&counts)),
            AssignmentSource::DefaultStoredIgnored(error),
        ),
        Some(Ok(assignment)) if assignment.counts(weights.len()) == counts => {
            (assignment, AssignmentSource::Stored)
        }
        Some(Ok(assignment)) => {
            let owners = assignment.owners().into_iter().map(Some).collect();
            (rebalance(owners, &counts), AssignmentSource::Reassigned)
        }
    })
}

fn region_error(field: &'static str, reason: String) -> Error {
    Error::Region { field, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(n: i64) -> BucketCount {
        BucketCount::new(n).unwrap()
    }

    fn reason(result: Result<Assignment, Error>) -> String {
        result.unwrap_err().to_string()
    }

    #[test]
    fn bucket_counts_from_2_to_1024() {
        assert_eq!(n(2).get(), 2);
        assert_eq!(n(1024).get(), 1024);
        for bad in [1, 1025, 0, -1, 65_538, i64::MAX] {
            assert_eq!(
                BucketCount::new(bad).unwrap_err().to_string(),
                format!("policy: field `buckets`: is {bad}, not an integer from 2 to 1024")
            );
        }
    }

    #[test]
    fn apportion_by_hand() {
        assert_eq!(apportion(&[50, 30, 20], n(10)).unwrap(), [5, 3, 2]);
        // 2/3 each: both leftover buckets to the first two.
        assert_eq!(apportion(&[1, 1, 1], n(2)).unwrap(), [1, 1, 0]);
        assert_eq!(apportion(&[1, 1, 1], n(1024)).unwrap(), [342, 341, 341]);
        // Quotas 2.67 and 1.33: remainders 8 mod 3 = 2 and 4 mod 3 = 1.
        assert_eq!(apportion(&[2, 1], n(4)).unwrap(), [3, 1]);
        assert_eq!(apportion(&[0, 5], n(4)).unwrap(), [0, 4]);
        // 1024e6 / 1000001 = 1023 r 998977; 1024 / 1000001 = 0 r 1024.
        assert_eq!(apportion(&[1_000_000, 1], n(1024)).unwrap(), [1024, 0]);
        assert_eq!(
            apportion(&[u32::MAX, u32::MAX], n(1024)).unwrap(),
            [512, 512]
        );
    }

    #[test]
    fn apportion_refuses_no_weight_and_too_many_origins() {
        for weights in [&[][..], &[0, 0][..]] {
            assert_eq!(
                apportion(weights, n(4)).unwrap_err().to_string(),
                "region: field `weight`: no listed origin has a positive weight"
            );
        }
        let mut weights = vec![1u32; MAX_ASSIGNED_ORIGINS];
        let counts = apportion(&weights, n(1024)).unwrap();
        assert_eq!(counts.iter().map(|&c| u32::from(c)).sum::<u32>(), 1024);
        assert_eq!((counts[1023], counts[1024]), (1, 0));
        // The last origin of 65,536 can be assigned a bucket and encoded.
        *weights.last_mut().unwrap() = 1_000_000;
        let assignment = default_assignment(&weights, n(1024)).unwrap();
        assert_eq!(assignment.origin_of(1023), Some(65_535));
        let decoded = Assignment::decode(&assignment.encode(), n(1024), weights.len()).unwrap();
        assert_eq!(decoded, assignment);
        weights.push(1);
        assert_eq!(
            apportion(&weights, n(1024)).unwrap_err().to_string(),
            "region: field `origins`: lists 65537 origins; a bucketed region lists at most 65536"
        );
    }

    #[test]
    fn default_blocks_and_lookups() {
        let assignment = default_assignment(&[50, 0, 30, 20], n(10)).unwrap();
        assert_eq!(assignment.encode(), "0:5,2:3,3:2");
        assert_eq!(assignment.owners(), [0, 0, 0, 0, 0, 2, 2, 2, 3, 3]);
        assert_eq!(assignment.counts(4), [5, 0, 3, 2]);
        assert_eq!(assignment.buckets(), 10);
        assert_eq!(assignment.run_count(), 3);
        assert_eq!(assignment.heap_bytes(), 12);
        assert_eq!(
            (0..11).map(|b| assignment.origin_of(b)).collect::<Vec<_>>(),
            [0, 0, 0, 0, 0, 2, 2, 2, 3, 3]
                .map(Some)
                .into_iter()
                .chain([None])
                .collect::<Vec<_>>()
        );
        assert_eq!(assignment.origin_of(u16::MAX), None);
    }

    #[test]
    fn decode_reads_the_canonical_form_only() {
        let ok = |text: &str, buckets: i64, origins: usize| {
            Assignment::decode(text, n(buckets), origins).map(|a| a.encode())
        };
        assert_eq!(ok("0:5,1:5", 10, 2).unwrap(), "0:5,1:5");
        assert_eq!(ok("1:2", 2, 2).unwrap(), "1:2");
        assert_eq!(ok("0:1024", 1024, 1).unwrap(), "0:1024");
        assert_eq!(ok("1:1,0:1,1:1", 3, 2).unwrap(), "1:1,0:1,1:1");
        let refused = |text: &str, buckets: i64, origins: usize| {
            ok(text, buckets, origins)
                .unwrap_err()
                .to_string()
                .strip_prefix("region: field `buckets`: ")
                .expect("a buckets error")
                .to_owned()
        };
        let syntax = "not ORIGIN:COUNT (decimal integers of at most 5 digits, without sign or leading zeros)";
        assert_eq!(refused("", 2, 2), "is empty");
        for (text, run) in [
            ("01:2", 0),
            ("0:02", 0),
            ("+0:2", 0),
            ("-1:2", 0),
            ("0:1e2", 0),
            (" 0:2", 0),
            ("0:2 ", 0),
            ("0:2,", 1),
            (",0:2", 0),
            ("0:1,,1:1", 1),
            ("0:1:1", 0),
            ("0", 0),
            (":2", 0),
            ("0:", 0),
            ("0;2", 0),
            ("0:1,1:100000", 1),
            ("000000:2", 0),
            ("0:١", 0),
        ] {
            assert_eq!(
                refused(text, 2, 2),
                format!("run {run} is {syntax}"),
                "{text:?}"
            );
        }
        assert_eq!(
            refused("0:1,2:1", 2, 2),
            "run 1 gives origin 2; the region lists 2 origins"
        );
        assert_eq!(
            refused("0:1,99999:1", 2, 2),
            "run 1 gives origin 99999; the region lists 2 origins"
        );
        assert_eq!(refused("0:0,1:2", 2, 2), "run 0 counts no bucket");
        assert_eq!(
            refused("0:1,0:1", 2, 2),
            "run 1 gives origin 0 as the run before it does: one run"
        );
        assert_eq!(
            refused("0:1,1:2", 2, 2),
            "covers more than the policy's 2 buckets (at run 1)"
        );
        assert_eq!(refused("0:1", 2, 2), "covers 1 buckets, not the policy's 2");
        // Written for another N: refused, never read as a part of this one.
        assert_eq!(
            refused("0:512,1:512", 512, 2),
            "covers more than the policy's 512 buckets (at run 1)"
        );
    }

    #[test]
    fn decode_length_limit_at_its_edge() {
        // The longest canonical encoding: 1,024 one-bucket runs of five-digit origins.
        let longest: Vec<String> = (0..1024).map(|b| format!("{}:1", 10_000 + b % 2)).collect();
        let longest = longest.join(",");
        assert_eq!(longest.len(), MAX_ENCODED_BYTES);
        let assignment = Assignment::decode(&longest, n(1024), 10_002).unwrap();
        assert_eq!(assignment.encode(), longest);
        assert_eq!(assignment.run_count(), 1024);
        assert_eq!(assignment.heap_bytes(), 4096);
        let past = format!("{longest},");
        assert_eq!(
            reason(Assignment::decode(&past, n(1024), 10_002)),
            "region: field `buckets`: is 8192 bytes; an encoded assignment is at most 8191"
        );
        // A 4 MB hostile value is refused by its length, before any run is read.
        let huge = "0:1,".repeat(1 << 20);
        assert!(reason(Assignment::decode(&huge, n(1024), 2)).contains("4194304 bytes"));
    }

    #[test]
    fn reassign_checks_the_stored_origins() {
        let stored = Assignment::decode("0:1,2:1", n(2), 3).unwrap();
        assert_eq!(
            reason(reassign(&stored, &[1, 1])),
            "region: field `buckets`: gives a bucket to origin 2; the region lists 2 origins"
        );
        assert_eq!(
            reason(reassign_by_name(&stored, &["a", "b"], &["a", "b"], &[1, 1])),
            "region: field `origins`: the stored assignment gives a bucket to origin 2; 2 were listed"
        );
        assert_eq!(
            reason(reassign_by_name(
                &stored,
                &["a", "b", "c"],
                &["a", "b"],
                &[1]
            )),
            "region: field `weight`: gives 1 weights for 2 origins"
        );
        assert_eq!(
            reason(reassign_by_name(
                &stored,
                &["a", "b", "c"],
                &["a", "a"],
                &[1, 1]
            )),
            "region: field `origins`: origin \"a\" is listed twice"
        );
        assert_eq!(
            reason(reassign_by_name(
                &stored,
                &["a", "b", "b"],
                &["a", "b"],
                &[1, 1]
            )),
            "region: field `origins`: origin \"b\" is listed twice"
        );
    }

    #[test]
    fn effective_assignment_of_each_source() {
        let effective = |stored: Option<Result<&str, &str>>, weights: &[u32], buckets: i64| {
            let (assignment, source) = effective_assignment(stored, weights, n(buckets)).unwrap();
            (assignment.encode(), source)
        };
        assert_eq!(
            effective(None, &[50, 50], 4),
            ("0:2,1:2".into(), AssignmentSource::Default)
        );
        assert_eq!(
            effective(Some(Ok("1:2,0:2")), &[50, 50], 4),
            ("1:2,0:2".into(), AssignmentSource::Stored)
        );
        // Origin 1 drained without the assignment: its buckets move, and only they.
        assert_eq!(
            effective(Some(Ok("1:2,0:2")), &[50, 0], 4),
            ("0:4".into(), AssignmentSource::Reassigned)
        );
        assert_eq!(
            effective(Some(Ok("0:1,1:3")), &[1, 1, 2], 4),
            ("0:1,1:1,2:2".into(), AssignmentSource::Reassigned)
        );
        for (stored, why) in [
            (
                Ok("0:2,1:2"),
                "covers more than the policy's 2 buckets (at run 1)",
            ),
            (Ok("0:1"), "covers 1 buckets, not the policy's 2"),
            (
                Ok("2:2"),
                "run 0 gives origin 2; the region lists 2 origins",
            ),
            (Ok(""), "is empty"),
            (Err("a number"), "is a number, not a string"),
        ] {
            assert_eq!(
                effective(Some(stored), &[1, 1], 2),
                (
                    "0:1,1:1".into(),
                    AssignmentSource::DefaultStoredIgnored(region_error("buckets", why.into()))
                ),
                "{stored:?}"
            );
        }
        assert!(effective_assignment(None, &vec![1; MAX_ASSIGNED_ORIGINS + 1], n(2)).is_err());
    }

    #[test]
    fn a_drain_and_its_restore_give_the_buckets_back() {
        let weights = [50, 50];
        let start = default_assignment(&weights, n(1024)).unwrap();
        let drained = reassign(&start, &[0, 50]).unwrap();
        assert_eq!(drained.encode(), "1:1024");
        let restored = reassign(&drained, &weights).unwrap();
        assert_eq!(restored, start);
        // Three origins, the middle one drained: its block splits between the others' new
        // default blocks, and comes back whole.
        let start = default_assignment(&[1, 1, 1], n(1024)).unwrap();
        assert_eq!(start.encode(), "0:342,1:341,2:341");
        let drained = reassign(&start, &[1, 0, 1]).unwrap();
        assert_eq!(drained.encode(), "0:512,2:512");
        assert_eq!(reassign(&drained, &[1, 1, 1]).unwrap(), start);
    }
}
