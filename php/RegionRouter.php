<?php

declare(strict_types=1);

/*
 * The userland twin of the dw_router extension's \RegionRouter.
 *
 * It implements docs/routing.md and docs/snapshot-format.md line for line and is the
 * oracle of the differential test (tests/differential/). It also serves nodes that run
 * without the extension: php/bootstrap.php aliases it to \RegionRouter there.
 *
 * This class is the extension's public API over three parts, each in a file of its name:
 *   php/RoutingPolicy.php  the chain of docs/routing.md over one table (walk, policy/global,
 *                          region values compiled lazily);
 *   php/SnapshotCache.php  the snapshot file read into a table: per process (one cache per
 *                          path, held here) and in APCu, keeping the last good table;
 *   php/AnswerCounter.php  each answer counted under its labels (traffic()).
 * The stage overlay the agent applies is php/Stages.php (\DwRouter\Stages).
 */

namespace DwRouter;

require_once __DIR__ . '/Continents.php';
require_once __DIR__ . '/Settings.php';
require_once __DIR__ . '/CacheTags.php';
require_once __DIR__ . '/RoutingPolicy.php';
require_once __DIR__ . '/SnapshotCache.php';
require_once __DIR__ . '/AnswerCounter.php';

final class RegionRouter
{
    public const DEFAULT_SNAPSHOT_PATH = '/run/dw-router/routing.json';
    public const DEFAULT_PREFIX = RoutingPolicy::DEFAULT_PREFIX;
    public const DEFAULT_FALLBACK_SHARD = 'us-1';
    public const DEFAULT_FALLBACK_ORIGIN = 'iad-a';
    public const DEFAULT_MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024;
    public const SNAPSHOT_FORMAT = 1;
    public const WEIGHT_MAX = 1_000_000;

    /** The built-in table's source (php/Continents.php, generated). */
    public const CONTINENT_TABLE_SOURCE = Continents::CONTINENT_TABLE_SOURCE;

    /**
     * The snapshot cache of every snapshot path this process has opened: the table in
     * use (the last good one), the file signature it came from, and the counters of
     * stats(). Forgetting it is what a fresh process sees (tests/differential/twin-selftest.php).
     *
     * @var array<string, SnapshotCache>
     */
    private static array $paths = [];

    private readonly string $path;
    private readonly string $fallbackShard;
    private readonly string $fallbackOrigin;
    private readonly bool $apcu;
    private readonly int $maxSnapshotBytes;
    private readonly AnswerCounter $counter;

    /** @var array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}|null */
    private ?array $table;

    /** The routing policy over $table. */
    private RoutingPolicy $routing;

    /** The revision of the table the last resolve() answered from; null before any. */
    private ?int $answeredRevision = null;

    /**
     * @param array{fallback_shard?: string, fallback_origin?: string, apcu?: bool, max_snapshot_bytes?: int} $options
     */
    public function __construct(?string $snapshotPath = null, array $options = [])
    {
        $this->path = $snapshotPath ?? Settings::iniString('dw_router.snapshot_path') ?? self::DEFAULT_SNAPSHOT_PATH;
        $this->fallbackShard = Settings::stringOption($options, 'fallback_shard')
            ?? Settings::iniString('dw_router.fallback_shard') ?? self::DEFAULT_FALLBACK_SHARD;
        $this->fallbackOrigin = Settings::stringOption($options, 'fallback_origin')
            ?? Settings::iniString('dw_router.fallback_origin') ?? self::DEFAULT_FALLBACK_ORIGIN;
        $apcuAvailable = \function_exists('apcu_enabled') && \apcu_enabled();
        $this->apcu = $apcuAvailable && (bool) ($options['apcu'] ?? true);
        $max = $options['max_snapshot_bytes'] ?? Settings::iniBytes('dw_router.max_snapshot_bytes');
        $this->maxSnapshotBytes = \is_int($max) && $max > 0 ? $max : self::DEFAULT_MAX_SNAPSHOT_BYTES;
        $this->counter = new AnswerCounter($this->apcu);

        $this->table = $this->snapshots()->load($this->apcu, $this->maxSnapshotBytes);
        $this->routing = new RoutingPolicy($this->table);
    }

    /**
     * Routes one request through the chain of docs/routing.md: subdivision `CC-SUB`,
     * country `CC`, the continent bucket of `CC`, policy.default, policy.failover, then
     * the fail-open route. Never raises; any byte string is a valid geo.
     *
     * @return array{shard: string, origin: string}
     */
    public function resolve(string $country, ?string $stickyKey = null, ?int $bucket = null): array
    {
        if ($bucket !== null && $bucket < 0) {
            throw new \ValueError('RegionRouter::resolve(): Argument #3 ($bucket) must be greater than or equal to 0');
        }
        $this->answeredRevision = $this->table['revision'] ?? 0;
        $walk = null;
        if ($this->table !== null) {
            $walk = $this->routing->walk($country, $stickyKey, false, $bucket);
            if ($walk['route'] !== null) {
                $this->counter->count($this->routing, $country, $walk['stage'], $walk['answered_by'], $walk['route'], self::kind($stickyKey, $walk));

                return $walk['route'];
            }
        }
        $route = ['shard' => $this->fallbackShard, 'origin' => $this->fallbackOrigin];
        $this->counter->count($this->routing, $country, 'fail_open', null, $route, self::kind($stickyKey, $walk));

        return $route;
    }

    /**
     * The answer counters' kind of an answer: sticky, bucket (a bucket below N with no
     * sticky key) or plain.
     *
     * @param array{bucket_kind: bool}|null $walk
     */
    private static function kind(?string $stickyKey, ?array $walk): string
    {
        return match (true) {
            $stickyKey !== null => 'sticky',
            $walk !== null && $walk['bucket_kind'] => 'bucket',
            default => 'plain',
        };
    }

    /** Visitor buckets' N of the table in use (policy/global's `buckets`), 0 when off. */
    public function buckets(): int
    {
        return $this->routing->buckets() ?? 0;
    }

    /**
     * The answers this process's resolve() gave (with APCu: every process of the pool
     * that shares its APCu), per label set, as the extension's traffic() returns them
     * (docs/traffic.md, "The userland twin"). Not served by dw-agent.
     *
     * @return array{counting: bool, state: string, file: null, answers: list<array{geo: string, step: string, key: string, origin: string, shard: string, kind: string, sticky: bool, answers: int}>, overflow: int}
     */
    public function traffic(): array
    {
        return ['counting' => true, 'state' => $this->counter->state(),
            'file' => null, 'answers' => $this->counter->rows(), 'overflow' => 0];
    }

    /**
     * How resolve() answers $geo, step by step, with why each step before the answer was
     * skipped (docs/routing.md, "Explaining a route"). For debugging, off the request
     * path; the same array as the extension's RegionRouter::explain(), except that the
     * twin gives no `reason` for an invalid value.
     *
     * @return array<string, mixed>
     */
    public function explain(string $geo, ?string $stickyKey = null, ?int $bucket = null): array
    {
        if ($bucket !== null && $bucket < 0) {
            throw new \ValueError('RegionRouter::explain(): Argument #3 ($bucket) must be greater than or equal to 0');
        }
        $walk = $this->routing->walk($geo, $stickyKey, true, $bucket);
        $failOpen = $walk['route'] === null;

        $explained = [
            'geo' => $geo,
            'sticky_key' => $stickyKey,
            'revision' => $this->revision(),
            'continent' => $walk['continent'][0] ?? null,
            'continent_source' => $walk['continent'][1] ?? null,
            'continent_table' => self::CONTINENT_TABLE_SOURCE,
            'steps' => $walk['steps'],
            'fail_open' => $failOpen,
            'shard' => $failOpen ? $this->fallbackShard : $walk['route']['shard'],
            'origin' => $failOpen ? $this->fallbackOrigin : $walk['route']['origin'],
            'answered_by' => $walk['answered_by'],
            'hash_key' => $walk['hash_key'],
            'hash_key_from' => $walk['hash_key_from'],
        ];
        // Only when a bucket was given, as the extension: without one the shape is today's.
        if ($bucket !== null) {
            $explained['bucket'] = $bucket;
            $explained['buckets'] = $this->buckets();
            $explained['bucket_outcome'] = $walk['bucket_outcome'];
        }

        return $explained;
    }

    /**
     * The page-cache tags of the answer resolve($geo, $stickyKey, $bucket) gives from the
     * table the last resolve() answered from (docs/routing.md, "Cache tags"): pass the
     * arguments resolve() was given; `dw:b` comes last when the bucket picked the origin.
     * Null before any resolve(), after a reload() changed the table, or for an answer
     * with no table (revision 0).
     *
     * @return list<string>|null
     */
    public function cacheTags(string $geo, ?string $stickyKey = null, ?int $bucket = null): ?array
    {
        if ($bucket !== null && $bucket < 0) {
            throw new \ValueError('RegionRouter::cacheTags(): Argument #3 ($bucket) must be greater than or equal to 0');
        }
        if ($this->table === null || !$this->answeredRevision || $this->revision() !== $this->answeredRevision) {
            return null;
        }
        $walk = $this->routing->walk($geo, $stickyKey, true, $bucket);

        return CacheTags::ofSteps($walk['steps'], $walk['route'] !== null, $walk['hash_key_from'] === 'bucket');
    }

    /** The revision of the table in use; 0 when there is none. */
    public function revision(): int
    {
        return $this->table['revision'] ?? 0;
    }

    /**
     * The revision of the table the last resolve() answered from (revision() before any):
     * what to report beside a route, since a reload may land between the two calls.
     */
    public function answeredRevision(): int
    {
        return $this->answeredRevision ?? $this->revision();
    }

    /**
     * The policy object as an associative array, unknown fields included; [] when the
     * policy key is missing or invalid (or there is no table).
     *
     * @return array<array-key, mixed>
     */
    public function policy(): array
    {
        return $this->routing->object();
    }

    /**
     * Re-checks the snapshot file now; true when the revision in use changed. A router
     * otherwise keeps the table it was constructed with (the next construction sees a
     * new file by itself).
     */
    public function reload(): bool
    {
        $before = $this->revision();
        $table = $this->snapshots()->load($this->apcu, $this->maxSnapshotBytes);
        if ($table !== $this->table) {
            $this->table = $table;
            $this->routing = new RoutingPolicy($table);
        }

        return $this->revision() !== $before;
    }

    /** @return array<string, mixed> */
    public function stats(): array
    {
        $counters = $this->snapshots()->counters();
        $census = $this->routing->census();

        return [
            'loads' => $counters['loads'],
            'reloads_reused' => $counters['reloads_reused'],
            'failed_loads' => $counters['failed_loads'],
            'invalid_keys' => $census['invalid_keys'],
            'last_load_time' => $counters['last_load_time'],
            'last_error' => $counters['last_error'],
            'reload_mechanism' => 'mtime',
            'path' => $this->path,
            'revision' => $this->revision(),
            'regions' => $census['regions'],
            'buckets' => $this->buckets(),
            'keys' => $this->table === null ? 0 : \count($this->table['kvs']),
            'apcu' => $this->apcu,
            'apcu_hits' => $counters['apcu_hits'],
            'stages' => $this->table['stages'] ?? [],
        ];
    }

    /**
     * The ids of the stages the table in use applies; [] when it serves current routing.
     *
     * @return list<string>
     */
    public function stages(): array
    {
        return array_column($this->table['stages'] ?? [], 'id');
    }

    /** This process's snapshot cache of the path (a new one after the process forgot it). */
    private function snapshots(): SnapshotCache
    {
        return self::$paths[$this->path] ??= new SnapshotCache($this->path);
    }
}
