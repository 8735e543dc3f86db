//! The cache tags of an answer (docs/routing.md, "Cache tags"): what the answer depended
//! on, named so that a page cache (LiteSpeed's LSCache, `X-LiteSpeed-Tag`) can purge
//! exactly the pages a routing change may change. Read from the chain's walk
//! ([`Table::walk`], the one `explain` shows), so the tags follow the chain by
//! construction. Off the request path: it allocates.

use crate::explain::ChainStage;
use crate::explain::Found;
use crate::table::Table;

/// The tag of every routed page (a `pick` change purges it).
pub const TAG_ALL: &str = "dw";
/// The tag of a page answered through `policy.default`, `policy.failover` or the
/// fail-open route.
pub const TAG_CHAIN: &str = "dw:chain";
/// The tag of a page whose chain consulted the country-to-continent mapping.
pub const TAG_CONTINENT: &str = "dw:cont";
/// What a tag longer than [`MAX_TAG_BYTES`] becomes; every region purge purges it.
pub const TAG_LONG: &str = "dw:long";
/// The prefix of the answering region's tag.
pub const TAG_REGION: &str = "dw:r:";
/// The prefix of the tag of a region key the chain looked up and skipped.
pub const TAG_MISSED: &str = "dw:m:";
/// The tag of a page whose origin a visitor bucket picked (the answering region's
/// assignment): a change of `policy/global`'s `buckets` purges it.
pub const TAG_BUCKET: &str = "dw:b";
/// The longest tag written as itself, in bytes; a longer one is [`TAG_LONG`].
pub const MAX_TAG_BYTES: usize = 128;

/// A region key (relative to `<prefix>region/`) as tags and purge lines write it: bytes
/// outside `A-Za-z0-9_./-` as `%XX`, upper-case hex (so `%` is `%25`).
pub fn encode_tag_key(key: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(key.len());
    for &byte in key {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'/' | b'-') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
    out
}

impl Table {
    /// The cache tags of the answer [`Table::resolve`] gives for `geo` with no bucket (a
    /// sticky key changes the pick only, never these tags), in this order: `dw`; `dw:r:<key>` of the
    /// answering region; `dw:m:<key>` of each region key looked up and skipped (absent
    /// or invalid), in chain order; `dw:chain` when the answer came from
    /// `policy.default`, `policy.failover` or fails open; `dw:cont` when the chain
    /// consulted the country's continent. Keys are encoded by [`encode_tag_key`]; a tag
    /// over [`MAX_TAG_BYTES`] is replaced by `dw:long`; no tag appears twice.
    pub fn cache_tags(&self, geo: &[u8]) -> Vec<String> {
        self.cache_tags_bucketed(geo, None, None)
    }

    /// The cache tags of the answer [`Table::resolve_bucketed`] gives for `geo`,
    /// `sticky_key` and `bucket`: [`Table::cache_tags`]'s, then `dw:b` when the bucket
    /// picked the origin (no sticky key, and [`Table::bucket_applies`]: buckets on, the
    /// bucket below N, the answering region has an assignment). A sticky key changes the
    /// tags only so: it wins over the bucket.
    pub fn cache_tags_bucketed(
        &self,
        geo: &[u8],
        sticky_key: Option<&[u8]>,
        bucket: Option<u64>,
    ) -> Vec<String> {
        let walk = self.walk(geo);
        let mut tags: Vec<String> = vec![TAG_ALL.to_owned()];
        let mut push = |tag: String| {
            let tag = if tag.len() > MAX_TAG_BYTES {
                TAG_LONG.to_owned()
            } else {
                tag
            };
            if !tags.contains(&tag) {
                tags.push(tag);
            }
        };
        let answering = walk.steps.last().filter(|_| walk.answer.is_some());
        if let Some(geo) = answering.and_then(|step| step.geo.as_deref()) {
            push(format!("{TAG_REGION}{}", encode_tag_key(geo)));
        }
        for step in &walk.steps {
            if let (Found::Missing, Some(geo)) = (step.found, step.geo.as_deref()) {
                push(format!("{TAG_MISSED}{}", encode_tag_key(geo)));
            }
        }
        let through_chain = match answering {
            Some(step) => matches!(step.stage, ChainStage::Default | ChainStage::Failover(_)),
            None => true,
        };
        if through_chain {
            push(TAG_CHAIN.to_owned());
        }
        if walk
            .steps
            .iter()
            .any(|step| step.stage == ChainStage::Continent)
        {
            push(TAG_CONTINENT.to_owned());
        }
        let by_bucket = match (sticky_key, bucket) {
            (None, Some(bucket)) => self.bucket_applies(geo, bucket),
            _ => false,
        };
        if by_bucket {
            push(TAG_BUCKET.to_owned());
        }
        tags
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGION: &str = r#"{\"shard\":\"s\",\"origins\":[\"o\"],\"weight\":{\"o\":1}}"#;

    /// A table with a valid region for each of `regions`, an invalid one for each of
    /// `invalid`, and `policy` (a JSON object, escaped) if any.
    fn table(regions: &[&str], invalid: &[&str], policy: Option<&str>) -> Table {
        let mut kvs: Vec<String> = regions
            .iter()
            .map(|geo| format!(r#""/dw/routing/region/{geo}":"{REGION}""#))
            .collect();
        kvs.extend(
            invalid
                .iter()
                .map(|geo| format!(r#""/dw/routing/region/{geo}":"not json""#)),
        );
        if let Some(policy) = policy {
            kvs.push(format!(r#""/dw/routing/policy/global":"{policy}""#));
        }
        let bytes = format!(
            r#"{{"format":1,"revision":5,"prefix":"/dw/routing/","kvs":{{{}}}}}"#,
            kvs.join(",")
        );
        Table::parse(bytes.as_bytes()).expect("a valid snapshot")
    }

    fn tags(table: &Table, geo: &[u8]) -> Vec<String> {
        table.cache_tags(geo)
    }

    #[test]
    fn a_country_with_its_own_region_depends_on_it_alone() {
        let table = table(&["DE", "US"], &[], None);
        assert_eq!(tags(&table, b"DE"), ["dw", "dw:r:DE"]);
    }

    #[test]
    fn a_subdivision_names_the_keys_it_skipped_in_chain_order() {
        let table = table(&["US", "US-CA"], &["DE-BY"], None);
        assert_eq!(tags(&table, b"US-CA"), ["dw", "dw:r:US-CA"]);
        assert_eq!(tags(&table, b"US-NY"), ["dw", "dw:r:US", "dw:m:US-NY"]);
        // An invalid key is skipped like an absent one.
        assert_eq!(
            tags(&table, b"DE-BY"),
            [
                "dw",
                "dw:r:US",
                "dw:m:DE-BY",
                "dw:m:DE",
                "dw:m:continent/EU",
                "dw:chain",
                "dw:cont"
            ]
        );
    }

    #[test]
    fn a_continent_bucket_answer_depends_on_the_mapping() {
        let table = table(&["continent/EU", "US"], &[], None);
        assert_eq!(
            tags(&table, b"FR"),
            ["dw", "dw:r:continent/EU", "dw:m:FR", "dw:cont"]
        );
        // A country with no continent consulted the mapping too (continent_of can give
        // it one), but looked no bucket up.
        assert_eq!(
            tags(&table, b"XX"),
            ["dw", "dw:r:US", "dw:m:XX", "dw:chain", "dw:cont"]
        );
    }

    #[test]
    fn failover_answers_name_every_skipped_policy_geo() {
        let policy = r#"{\"default\":\"BR\",\"failover\":[\"continent/AS\",\"BR\",\"JP\"]}"#;
        let table = table(&["JP"], &[], Some(policy));
        assert_eq!(
            tags(&table, b"zz"),
            [
                "dw",
                "dw:r:JP",
                "dw:m:zz",
                "dw:m:BR",
                "dw:m:continent/AS",
                "dw:chain"
            ]
        );
    }

    #[test]
    fn a_fail_open_answer_is_a_chain_answer() {
        let table = table(&[], &[], None);
        assert_eq!(
            tags(&table, b"DE"),
            [
                "dw",
                "dw:m:DE",
                "dw:m:continent/EU",
                "dw:m:US",
                "dw:chain",
                "dw:cont"
            ]
        );
    }

    #[test]
    fn a_callers_bucket_geo_is_never_looked_up() {
        let table = table(&["continent/EU", "US"], &[], None);
        assert_eq!(tags(&table, b"continent/EU"), ["dw", "dw:r:US", "dw:chain"]);
    }

    #[test]
    fn dw_b_only_where_a_bucket_picked_the_origin() {
        let table = table(&["DE"], &[], Some(r#"{\"buckets\":4}"#));
        let tags = |sticky: Option<&[u8]>, bucket| table.cache_tags_bucketed(b"DE", sticky, bucket);
        assert_eq!(tags(None, Some(0)), ["dw", "dw:r:DE", "dw:b"]);
        // The last bucket below N, and the first past it.
        assert_eq!(tags(None, Some(3)), ["dw", "dw:r:DE", "dw:b"]);
        assert_eq!(tags(None, Some(4)), ["dw", "dw:r:DE"]);
        assert_eq!(tags(None, Some(u64::MAX)), ["dw", "dw:r:DE"]);
        // A sticky key wins over the bucket; no bucket is today's tags.
        assert_eq!(tags(Some(b"K"), Some(1)), ["dw", "dw:r:DE"]);
        assert_eq!(tags(None, None), table.cache_tags(b"DE"));
        // Buckets off: a bucket changes nothing.
        let off = self::table(&["DE"], &[], None);
        assert_eq!(
            off.cache_tags_bucketed(b"DE", None, Some(1)),
            ["dw", "dw:r:DE"]
        );
        // A fail-open answer has no assignment.
        let empty = self::table(&[], &[], Some(r#"{\"buckets\":4}"#));
        assert!(
            !empty
                .cache_tags_bucketed(b"zz", None, Some(1))
                .contains(&TAG_BUCKET.to_owned())
        );
    }

    #[test]
    fn key_bytes_outside_the_safe_set_are_percent_encoded() {
        assert_eq!(encode_tag_key(b"A-z_0.9/x"), "A-z_0.9/x");
        assert_eq!(encode_tag_key(b"a,b c%"), "a%2Cb%20c%25");
        assert_eq!(encode_tag_key(b"\x00\xff\x7f:"), "%00%FF%7F%3A");
        let table = table(&["US"], &[], None);
        assert_eq!(
            tags(&table, b"x,y\xff"),
            ["dw", "dw:r:US", "dw:m:x%2Cy%FF", "dw:chain"]
        );
    }

    #[test]
    fn a_tag_over_128_bytes_is_dw_long_once() {
        let table = table(&["US"], &[], None);
        // dw:m: is 5 bytes: a 123-byte geo makes a tag of exactly 128, kept.
        let edge = "g".repeat(MAX_TAG_BYTES - TAG_MISSED.len());
        assert_eq!(
            tags(&table, edge.as_bytes()),
            [
                "dw".to_owned(),
                "dw:r:US".to_owned(),
                format!("dw:m:{edge}"),
                "dw:chain".to_owned()
            ]
        );
        let over = format!("{edge}g");
        assert_eq!(
            tags(&table, over.as_bytes()),
            ["dw", "dw:r:US", "dw:long", "dw:chain"]
        );
        // Encoding counts: 41 encoded bytes are 123 tag bytes, 42 are over.
        assert_eq!(
            tags(&table, &[b','; 41]).get(2).map(String::len),
            Some(MAX_TAG_BYTES)
        );
        assert_eq!(tags(&table, &[b','; 42])[2], "dw:long");
        // Two long tags are one dw:long.
        let policy = format!(r#"{{\"default\":\"{over}\",\"failover\":[\"US\"]}}"#);
        let table = self::table(&["US"], &[], Some(&policy));
        assert_eq!(
            tags(&table, format!("{over}x").as_bytes()),
            ["dw", "dw:r:US", "dw:long", "dw:chain"]
        );
    }

    #[test]
    fn a_sticky_key_never_changes_the_tags_and_the_walk_is_the_answers() {
        let table = table(&["DE", "continent/EU", "US"], &[], None);
        for geo in [&b"DE"[..], b"FR", b"US-CA", b"XX", b"", b"continent/EU"] {
            let explanation = table.explain(geo, Some(b"visitor"));
            let answered = explanation.route.as_ref().map(|route| route.geo.clone());
            let tag = tags(&table, geo)
                .into_iter()
                .find_map(|tag| tag.strip_prefix(TAG_REGION).map(str::to_owned));
            assert_eq!(tag, answered, "{geo:?}");
        }
    }
}
