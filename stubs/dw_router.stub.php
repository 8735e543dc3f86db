<?php

/**
 * Stubs of the dw_router extension, for IDEs and static analysers.
 *
 * Written by hand from the extension's contract (docs/routing.md, docs/snapshot-format.md);
 * tests/phpt/074-stub-reflection.phpt holds it to the loaded extension's Reflection.
 *
 * @generate-class-entries
 */

/**
 * Routes a visitor's country to a catalog shard and an upstream origin, from the routing
 * snapshot that dw-agent keeps current (by default /run/dw-router/routing.json). A file at
 * the path is only read if it is a regular file (no symlink followed) whose owner and
 * directory are trusted (docs/snapshot-trust.md, ini dw_router.trusted_owner).
 *
 * Every RegionRouter for one snapshot path in a process shares one parsed table, kept
 * fresh by an inotify watch on the snapshot's directory (or, when inotify is unavailable,
 * a stat at most every dw_router.poll_interval_ms), so constructing one per request is
 * cheap and does no file I/O.
 */
final class RegionRouter
{
    /**
     * Opens the router for a snapshot file.
     *
     * @param string|null $snapshotPath the snapshot file, an absolute path; null means
     *                                  the ini setting dw_router.snapshot_path. A missing
     *                                  file is not an error: the router fails open until
     *                                  it appears.
     * @throws ValueError when $snapshotPath is relative (or empty): it would depend on the
     *                    working directory of the path's first use in the process
     */
    public function __construct(?string $snapshotPath = null) {}

    /**
     * Resolves a visitor's geo to a shard and an origin.
     *
     * The chain (docs/routing.md): for a subdivision `CC-SUB` (^[A-Z]{2}-[A-Z0-9]{1,3}$)
     * region/CC-SUB, then as for `CC`; for a country `CC` (^[A-Z]{2}$) region/CC, then
     * the bucket region/continent/<CODE> of its continent (built-in table, or
     * policy.continent_of); any other geo only its own key. Then policy.default, each
     * policy.failover geo (either may name a bucket, `continent/EU`). The first with a
     * valid region answers, its origin picked (legacy or rendezvous pick) with the hash
     * key $stickyKey, else the subdivision when its own key answers, else `CC` (the geo
     * itself for other geos). When none has one, the fail-open route from the ini
     * settings dw_router.fallback_shard / dw_router.fallback_origin. Never throws for any
     * string: empty, long, NUL bytes, invalid UTF-8.
     *
     * Precedence: a sticky key wins where given; else a visitor bucket below buckets()
     * picks the answering region's origin by its assignment (docs/routing.md, "Buckets");
     * else the country's answer. Without a sticky key and without a bucket the answer is
     * the country's, buckets on or off. A bucket while buckets() is 0, or at or past it,
     * answers as without one; a negative bucket is a ValueError.
     *
     * @param string      $country   the visitor's geo (`CF-IPCountry`, optionally
     *                               `-` and `cf-region-code`), matched byte for byte
     * @param string|null $stickyKey keeps one visitor on one origin (e.g. a session id)
     * @param int|null    $bucket    the visitor's bucket (the `dw_bucket` cookie), 0 to
     *                               buckets() - 1
     *
     * @return array{shard: string, origin: string}
     */
    public function resolve(string $country, ?string $stickyKey = null, ?int $bucket = null): array {}

    /**
     * Visitor buckets' N of the snapshot in use (policy/global's `buckets`), 0 when off:
     * a visitor's bucket is drawn below it.
     */
    public function buckets(): int {}

    /**
     * The etcd revision of the snapshot in use; 0 when none was loaded.
     */
    public function revision(): int {}

    /**
     * The etcd revision of the table this object's last resolve() answered from;
     * revision() before any resolve(). Report this beside a route (X-DW-Revision): a
     * reload may land between a resolve() and a revision() call.
     */
    public function answeredRevision(): int {}

    /**
     * The policy/global object, as json_decode($value, true) gives it, unknown fields
     * included; [] when the snapshot has no (valid) policy.
     *
     * @return array<array-key, mixed>
     */
    public function policy(): array {}

    /**
     * Counters and state of this router's snapshot source.
     *
     * @return array{
     *     path: string,
     *     revision: int,
     *     regions: int,
     *     buckets: int,
     *     invalid_keys: int,
     *     loads: int,
     *     reloads_reused: int,
     *     failed_loads: int,
     *     last_load_time: float|null,
     *     reload_mechanism: 'inotify'|'poll'|'none',
     *     last_error: string|null,
     *     inotify_unavailable: string|null,
     *     tables_in_process: int,
     *     interned_routes: int,
     *     interned_bytes: int,
     *     invalid: array<string, string>,
     *     stages: list<array{id: string, revision: int}>
     * }
     */
    public function stats(): array {}

    /**
     * The answers resolve() counted on this node (docs/traffic.md): every worker of every
     * process tree that shares this process's counter file (one per PHP user, in
     * dw_router.answers_dir), one row per label set, and the answers counted past the
     * bounds. Answers, not requests: an app may resolve() more than once per request,
     * and a page served from LSCache never reaches PHP. Reads the whole counter file: not
     * for health checks (stats() is).
     *
     * @return array{
     *     counting: bool,
     *     state: string,
     *     file: ?string,
     *     answers: list<array{geo: string, step: string, key: string, origin: string, shard: string, kind: 'plain'|'sticky'|'bucket', sticky: bool, answers: int}>,
     *     overflow: int
     * }
     */
    public function traffic(): array {}

    /**
     * The ids of the stages the table in use applies (the node is in a staged rollout's
     * cohort, docs/routing.md "Stages"); [] when it serves current routing. Compare
     * revision() with answeredRevision() before reporting it beside an answer.
     *
     * @return list<string>
     */
    public function stages(): array {}

    /**
     * How resolve($geo, $stickyKey, $bucket) answers from the table in use, step by step: for
     * debugging, never on the request path (it allocates). Each step names its stage
     * (subdivision, country, continent, geo, default, failover), the geo and key looked up
     * and the outcome: answered, "no key", invalid (with the reason), "no continent"
     * (XX, T1, unassigned codes), or "bucket namespace" (a caller's `continent/...` geo is
     * never a bucket). Steps after the answer are not walked. A geo or key that is not
     * UTF-8 is shown with U+FFFD. Given a bucket, `bucket`, `buckets` (N, 0 when off)
     * and `bucket_outcome` say what it did: picked by the region's assignment (and where
     * that comes from), or why it was ignored; a negative bucket is a ValueError.
     *
     * @return array{
     *     geo: string,
     *     sticky_key: string|null,
     *     revision: int,
     *     continent: string|null,
     *     continent_source: 'table'|'policy.continent_of'|null,
     *     continent_table: string,
     *     steps: list<array{stage: string, geo: string|null, key: string|null, outcome: string, index?: int, reason?: string}>,
     *     fail_open: bool,
     *     shard: string,
     *     origin: string,
     *     answered_by: string|null,
     *     hash_key: string|null,
     *     hash_key_from: 'sticky'|'bucket'|'subdivision'|'country'|'geo'|null,
     *     bucket?: int,
     *     buckets?: int,
     *     bucket_outcome?: string
     * }
     */
    public function explain(string $geo, ?string $stickyKey = null, ?int $bucket = null): array {}

    /**
     * The page-cache tags of the answer resolve($geo, $stickyKey, $bucket) gives from the
     * table this object's last resolve() answered from (docs/routing.md, "Cache tags"):
     * pass the arguments resolve() was given. `dw` (every routed page), `dw:r:<key>` (the
     * region key that answered, e.g. `dw:r:DE`, `dw:r:continent/EU`), `dw:m:<key>` for
     * each region key the chain looked up and skipped (absent or invalid), in chain order,
     * `dw:chain` (answered by policy.default, policy.failover or fail-open), `dw:cont`
     * (the chain consulted the country's continent) and, last, `dw:b` when the visitor's
     * bucket picked the origin (buckets on, the bucket below N, no sticky key, the
     * answering region has an assignment: a change of N purges it). Key bytes outside
     * `A-Za-z0-9_./-` are written `%XX`; a tag over 128 bytes is `dw:long`. For
     * X-LiteSpeed-Tag (joined with `,`). A sticky key changes no other tag; a negative
     * bucket is a ValueError.
     *
     * @return list<string>|null null when no resolve() was made, when the table in use
     *                           is no longer the one that answered (a reload came
     *                           between), or when the answer had no table (revision 0):
     *                           the page must then not be cached
     */
    public function cacheTags(string $geo, ?string $stickyKey = null, ?int $bucket = null): ?array {}

    /**
     * Re-checks the snapshot file now. Reloads normally happen by themselves; this is for
     * scripts and tests.
     *
     * @return bool true when the revision in use changed
     */
    public function reload(): bool {}
}
