<?php

declare(strict_types=1);

/*
 * The userland twin of the dw_router extension's \RegionRouter.
 *
 * It implements docs/routing.md and docs/snapshot-format.md line for line and is the
 * oracle of the differential test (tests/differential/). It also serves nodes that run
 * without the extension: php/bootstrap.php aliases it to \RegionRouter there.
 *
 * Reload mechanism ("mtime"): every construction stats the snapshot. The decoded `kvs`
 * map (raw value strings) is cached per process, keyed by path, and in APCu, keyed by
 * path + mtime + inode + size + device, so a renamed-in snapshot is picked up by the next
 * construction with no invalidation step. Values are decoded lazily, only for the keys a
 * lookup touches. A snapshot that cannot be read as a whole keeps the last good table
 * (per process and in APCu) and counts a failed load; a missing file answers fail-open.
 */

namespace DwRouter;

require_once __DIR__ . '/TypedJson.php';
require_once __DIR__ . '/Continents.php';
require_once __DIR__ . '/SnapshotFile.php';
require_once __DIR__ . '/RegionValue.php';
require_once __DIR__ . '/Settings.php';
require_once __DIR__ . '/CacheTags.php';

final class RegionRouter
{
    public const DEFAULT_SNAPSHOT_PATH = '/run/dw-router/routing.json';
    public const DEFAULT_PREFIX = '/dw/routing/';
    public const DEFAULT_FALLBACK_SHARD = 'us-1';
    public const DEFAULT_FALLBACK_ORIGIN = 'iad-a';
    public const DEFAULT_MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024;
    public const SNAPSHOT_FORMAT = 1;
    public const WEIGHT_MAX = 1_000_000;

    /** Nesting limit for every json_decode: a value nested deeper is invalid JSON here. */
    private const JSON_DEPTH = TypedJson::DEPTH;

    private const APCU_TABLE = 'dw_router:table:';
    private const APCU_LAST_GOOD = 'dw_router:last_good:';
    private const APCU_TTL = 300;
    private const APCU_ANSWERS = 'dw_router:answers:';

    /**
     * This process's answers per label set ("geo\0step\0key\0origin\0shard\0sticky"),
     * when APCu does not hold them (traffic()).
     *
     * @var array<string, int>
     */
    private static array $answers = [];

    /** The policy when the snapshot has none. */
    private const DEFAULT_POLICY = ['default' => 'US', 'failover' => [], 'rendezvous' => false, 'continent_of' => [], 'valid' => true, 'object' => []];

    /** The continent bucket codes (`region/continent/<CODE>`). */
    private const CONTINENTS = ['AF', 'AN', 'AS', 'EU', 'NA', 'OC', 'SA'];

    /** The built-in table's source (php/Continents.php, generated). */
    public const CONTINENT_TABLE_SOURCE = Continents::CONTINENT_TABLE_SOURCE;

    /**
     * Per-process state of every snapshot path this process has opened: the table in use
     * (the last good one), the file signature it came from, and the counters of stats().
     *
     * @var array<string, array<string, mixed>>
     */
    private static array $paths = [];

    private readonly string $path;
    private readonly string $fallbackShard;
    private readonly string $fallbackOrigin;
    private readonly bool $apcu;
    private readonly int $maxSnapshotBytes;

    /** @var array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}|null */
    private ?array $table;

    /** The revision of the table the last resolve() answered from; null before any. */
    private ?int $answeredRevision = null;

    /** @var array<array-key, array{shard: string, origins: list<string>, weights: array<array-key, int>}|null> */
    private array $regions = [];

    /** @var array{default: string, failover: list<string>, rendezvous: bool, continent_of: array<string, string>, valid: bool, object: array<array-key, mixed>}|null */
    private ?array $policy = null;

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

        self::$paths[$this->path] ??= self::freshState();
        $this->table = $this->load();
    }

    /**
     * Routes one request through the chain of docs/routing.md: subdivision `CC-SUB`,
     * country `CC`, the continent bucket of `CC`, policy.default, policy.failover, then
     * the fail-open route. Never raises; any byte string is a valid geo.
     *
     * @return array{shard: string, origin: string}
     */
    public function resolve(string $country, ?string $stickyKey = null): array
    {
        $this->answeredRevision = $this->table['revision'] ?? 0;
        if ($this->table !== null) {
            $walk = $this->walk($country, $stickyKey, false);
            if ($walk['route'] !== null) {
                $this->count($country, $walk['stage'], $walk['answered_by'], $walk['route'], $stickyKey !== null);

                return $walk['route'];
            }
        }
        $route = ['shard' => $this->fallbackShard, 'origin' => $this->fallbackOrigin];
        $this->count($country, 'fail_open', null, $route, $stickyKey !== null);

        return $route;
    }

    /**
     * The answers this process's resolve() gave (with APCu: every process of the pool
     * that shares its APCu), per label set, as the extension's traffic() returns them
     * (docs/traffic.md, "The userland twin"). Not served by dw-agent.
     *
     * @return array{counting: bool, state: string, file: null, answers: list<array{geo: string, step: string, key: string, origin: string, shard: string, sticky: bool, answers: int}>, overflow: int}
     */
    public function traffic(): array
    {
        $counts = self::$answers;
        if ($this->apcu && class_exists(\APCUIterator::class)) {
            $counts = [];
            foreach (new \APCUIterator('/^' . preg_quote(self::APCU_ANSWERS, '/') . '/') as $entry) {
                $counts[substr($entry['key'], \strlen(self::APCU_ANSWERS))] = (int) $entry['value'];
            }
        }
        ksort($counts, SORT_STRING);
        $rows = [];
        foreach ($counts as $labels => $answers) {
            [$geo, $step, $key, $origin, $shard, $sticky] = explode("\0", (string) $labels);
            $rows[] = ['geo' => $geo, 'step' => $step, 'key' => $key, 'origin' => $origin, 'shard' => $shard,
                'sticky' => $sticky === '1', 'answers' => $answers];
        }

        return ['counting' => true, 'state' => $this->apcu ? 'userland, APCu' : 'userland, this process',
            'file' => null, 'answers' => $rows, 'overflow' => 0];
    }

    /** Counts one answer under its labels (docs/traffic.md, "The labels"). */
    private function count(string $geo, string $step, ?string $answeredBy, array $route, bool $sticky): void
    {
        $prefix = ($this->table['prefix'] ?? self::DEFAULT_PREFIX) . 'region/';
        $key = $answeredBy === null ? '' : CacheTags::encodeKey(substr($answeredBy, \strlen($prefix)));
        $labels = $this->geoLabel($geo) . "\0$step\0$key\0" . self::cut($route['origin']) . "\0"
            . self::cut($route['shard']) . "\0" . ($sticky ? '1' : '0');
        if ($this->apcu) {
            if (\apcu_inc(self::APCU_ANSWERS . $labels, 1) === false) {
                \apcu_add(self::APCU_ANSWERS . $labels, 1) || \apcu_inc(self::APCU_ANSWERS . $labels, 1);
            }

            return;
        }
        self::$answers[$labels] = (self::$answers[$labels] ?? 0) + 1;
    }

    /** The `geo` label: a built-in code or a key of the table; a keyless `CC-SUB` as `CC`. */
    private function geoLabel(string $geo): string
    {
        if ($geo === '') {
            return 'empty';
        }
        $known = fn (string $code): bool => isset(Continents::CONTINENT_OF[$code]) || $code === 'XX' || $code === 'T1'
            || $this->keyed($code);
        if (preg_match('/^[A-Z0-9]{2}\z/', $geo) === 1) {
            return $known($geo) ? $geo : 'other';
        }
        if ($this->keyed($geo)) {
            return self::cut(CacheTags::encodeKey($geo));
        }
        if (preg_match('/^([A-Z]{2})-[A-Z0-9]{1,3}\z/', $geo, $m) === 1) {
            return $known($m[1]) ? $m[1] : 'other';
        }

        return 'other';
    }

    /** Whether $geo has a valid region key of its own (never a bucket). */
    private function keyed(string $geo): bool
    {
        return $this->region($geo) !== null;
    }

    /** A label value cut to 128 bytes, the last being `~`, as the extension's. */
    private static function cut(string $value): string
    {
        return \strlen($value) <= 128 ? $value : substr($value, 0, 127) . '~';
    }

    /**
     * How resolve() answers $geo, step by step, with why each step before the answer was
     * skipped (docs/routing.md, "Explaining a route"). For debugging, off the request
     * path; the same array as the extension's RegionRouter::explain(), except that the
     * twin gives no `reason` for an invalid value.
     *
     * @return array<string, mixed>
     */
    public function explain(string $geo, ?string $stickyKey = null): array
    {
        $walk = $this->walk($geo, $stickyKey, true);
        $failOpen = $walk['route'] === null;

        return [
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
    }

    /**
     * The chain, walked: the route (null to fail open), and with $explain the steps.
     *
     * @return array{steps: list<array<string, mixed>>, stage: string|null, route: array{shard: string, origin: string}|null, continent: array{0: string, 1: string}|null, answered_by: string|null, hash_key: string|null, hash_key_from: string|null}
     */
    private function walk(string $geo, ?string $stickyKey, bool $explain): array
    {
        // No table (no file yet): the chain is walked over no keys and the default policy.
        $policy = $this->table === null ? self::DEFAULT_POLICY : $this->compiledPolicy();
        $prefix = $this->table['prefix'] ?? self::DEFAULT_PREFIX;
        $kvs = $this->table['kvs'] ?? [];
        $country = null;
        // [stage, geo looked up, hash key, bucket?]
        $chain = [];
        if (preg_match('/^[A-Z]{2}\z/', $geo) === 1) {
            $country = $geo;
        } elseif (preg_match('/^([A-Z]{2})-[A-Z0-9]{1,3}\z/', $geo, $m) === 1) {
            $country = $m[1];
            $chain[] = ['subdivision', $geo, $geo, false];
        } else {
            $chain[] = ['geo', $geo, $geo, false];
        }
        $continent = null;
        if ($country !== null) {
            $chain[] = ['country', $country, $country, false];
            $code = $policy['continent_of'][$country] ?? Continents::CONTINENT_OF[$country] ?? null;
            if ($code !== null) {
                $continent = [$code, isset($policy['continent_of'][$country]) ? 'policy.continent_of' : 'table'];
            }
            $chain[] = ['continent', $code === null ? null : 'continent/' . $code, $country, true];
        }
        $fallbackKey = $country ?? $geo;
        $chain[] = ['default', $policy['default'], $fallbackKey, null];
        foreach ($policy['failover'] as $index => $failover) {
            $chain[] = ['failover', $failover, $fallbackKey, null, $index];
        }

        $steps = [];
        foreach ($chain as $link) {
            [$stage, $lookup, $hashKey, $bucket] = $link;
            $step = ['stage' => $stage, 'geo' => $lookup, 'key' => null, 'outcome' => 'no key'];
            if (isset($link[4])) {
                $step['index'] = $link[4];
            }
            $region = null;
            if ($lookup === null) {
                $step['outcome'] = 'no continent';
            } else {
                $step['key'] = $prefix . 'region/' . $lookup;
                // A policy geo may name a bucket; the caller's geo never does.
                $bucket ??= str_starts_with($lookup, 'continent/');
                if ($stage === 'geo' && str_starts_with($lookup, 'continent/')) {
                    $step['outcome'] = 'bucket namespace';
                } else {
                    $region = $bucket ? $this->bucket(substr($lookup, \strlen('continent/'))) : $this->region($lookup);
                    if ($region !== null) {
                        $step['outcome'] = 'answered';
                    } elseif (\array_key_exists($step['key'], $kvs)) {
                        $step['outcome'] = 'invalid';
                    }
                }
            }
            if ($explain) {
                $steps[] = $step;
            }
            if ($region !== null) {
                $from = match (true) {
                    $stickyKey !== null => 'sticky',
                    $stage === 'subdivision' => 'subdivision',
                    $country !== null => 'country',
                    default => 'geo',
                };
                $hashKey = $stickyKey ?? $hashKey;
                $origin = $policy['rendezvous']
                    ? RegionValue::rendezvousPick($region['origins'], $region['weights'], $hashKey)
                    : RegionValue::legacyPick($region['origins'], $region['weights'], $hashKey);

                return [
                    'steps' => $steps,
                    'stage' => $stage,
                    'route' => ['shard' => $region['shard'], 'origin' => $origin],
                    'continent' => $continent,
                    'answered_by' => $step['key'],
                    'hash_key' => $hashKey,
                    'hash_key_from' => $from,
                ];
            }
        }

        return ['steps' => $steps, 'stage' => null, 'route' => null, 'continent' => $continent, 'answered_by' => null, 'hash_key' => null, 'hash_key_from' => null];
    }

    /**
     * The page-cache tags of the answer for $geo from the table the last resolve()
     * answered from (docs/routing.md, "Cache tags"); null before any resolve(), after a
     * reload() changed the table, or for an answer with no table (revision 0).
     *
     * @return list<string>|null
     */
    public function cacheTags(string $geo, ?string $stickyKey = null): ?array
    {
        if ($this->table === null || !$this->answeredRevision || $this->revision() !== $this->answeredRevision) {
            return null;
        }
        $walk = $this->walk($geo, $stickyKey, true);

        return CacheTags::ofSteps($walk['steps'], $walk['route'] !== null);
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
        return $this->table === null ? [] : $this->compiledPolicy()['object'];
    }

    /**
     * Re-checks the snapshot file now; true when the revision in use changed. A router
     * otherwise keeps the table it was constructed with (the next construction sees a
     * new file by itself).
     */
    public function reload(): bool
    {
        $before = $this->revision();
        $table = $this->load();
        if ($table !== $this->table) {
            $this->table = $table;
            $this->regions = [];
            $this->policy = null;
        }

        return $this->revision() !== $before;
    }

    /** @return array<string, mixed> */
    public function stats(): array
    {
        $state = self::$paths[$this->path];
        $invalidKeys = 0;
        $regions = 0;
        if ($this->table !== null) {
            // Counting needs every region compiled; the lookups themselves stay lazy.
            $regionPrefix = $this->table['prefix'] . 'region/';
            foreach ($this->table['kvs'] as $key => $_) {
                $key = (string) $key;
                if (str_starts_with($key, $regionPrefix)) {
                    $geo = substr($key, \strlen($regionPrefix));
                    $region = str_starts_with($geo, 'continent/')
                        ? $this->bucket(substr($geo, \strlen('continent/')))
                        : $this->region($geo);
                    $region === null ? $invalidKeys++ : $regions++;
                }
            }
            $policy = $this->compiledPolicy();
            if (!$policy['valid']) {
                $invalidKeys++;
            }
        }

        return [
            'loads' => $state['loads'],
            'reloads_reused' => $state['reloads_reused'],
            'failed_loads' => $state['failed_loads'],
            'invalid_keys' => $invalidKeys,
            'last_load_time' => $state['last_load_time'],
            'last_error' => $state['last_error'],
            'reload_mechanism' => 'mtime',
            'path' => $this->path,
            'revision' => $this->revision(),
            'regions' => $regions,
            'keys' => $this->table === null ? 0 : \count($this->table['kvs']),
            'apcu' => $this->apcu,
            'apcu_hits' => $state['apcu_hits'],
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

    // ---- loading -----------------------------------------------------------------------

    /** @return array<string, mixed> */
    private static function freshState(): array
    {
        return [
            'signature' => null,    // file signature the table in use was read from
            'table' => null,        // the last good table
            'bad_signature' => null, // file signature that last failed (not re-parsed)
            'missing' => false,
            'loads' => 0,
            'reloads_reused' => 0,
            'digest' => null,       // routing_digest of the file the table was parsed from
            'failed_loads' => 0,
            'apcu_hits' => 0,
            'last_load_time' => 0.0,
            'last_error' => null,
        ];
    }

    /** @return array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}|null */
    private function load(): ?array
    {
        $state = &self::$paths[$this->path];
        clearstatcache(true, $this->path);
        // file_exists() first: the common missing case then raises no (silenced) warning
        // for error handlers that ignore `@`.
        $stat = file_exists($this->path) ? @stat($this->path) : false;
        if ($stat === false) {
            // Fail open, as documented; counted once per disappearance.
            if (!$state['missing']) {
                $state['missing'] = true;
                $state['failed_loads']++;
                $state['last_error'] = 'snapshot missing';
            }

            return null;
        }
        $state['missing'] = false;

        $signature = self::signature($stat);
        if ($signature === $state['signature']) {
            return $state['table'];
        }
        if ($signature === $state['bad_signature']) {
            return $this->lastGood($state);
        }
        if ($this->apcu) {
            $cached = \apcu_fetch(self::APCU_TABLE . $this->path . "\0" . $signature, $hit);
            if ($hit && \is_array($cached)) {
                $state['apcu_hits']++;
                $state['digest'] = null;

                return $this->adopt($state, $signature, $cached, false);
            }
        }

        // Read through one handle so the signature names exactly the bytes parsed, even
        // if the agent renames a new snapshot in between.
        $handle = @fopen($this->path, 'rb');
        if ($handle === false) {
            return $this->failed($state, $signature, 'snapshot unreadable');
        }
        $fstat = @fstat($handle);
        if ($fstat !== false) {
            $signature = self::signature($fstat);
        }
        if ($fstat !== false && $fstat['size'] > $this->maxSnapshotBytes) {
            fclose($handle);

            return $this->failed($state, $signature, 'snapshot larger than max_snapshot_bytes');
        }
        $raw = @stream_get_contents($handle, $this->maxSnapshotBytes + 1);
        fclose($handle);
        if (!\is_string($raw)) {
            return $this->failed($state, $signature, 'snapshot unreadable');
        }
        if (\strlen($raw) > $this->maxSnapshotBytes) {
            return $this->failed($state, $signature, 'snapshot larger than max_snapshot_bytes');
        }
        // The routing_digest of the file the table was parsed from: parsing this one would
        // give the same answers, so the table is kept, at the new revision.
        $header = SnapshotFile::header($raw);
        if ($header !== null && $state['table'] !== null && $header[1] === $state['digest']) {
            $state['reloads_reused']++;

            return $this->adopt($state, $signature, ['revision' => $header[0]] + $state['table'], true);
        }
        $table = SnapshotFile::parse($raw);
        if (\is_string($table)) {
            return $this->failed($state, $signature, $table);
        }
        $state['digest'] = $header[1] ?? null;

        return $this->adopt($state, $signature, $table, true);
    }

    /**
     * @param array<string, mixed> $state
     * @param array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>} $table
     * @return array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}
     */
    private function adopt(array &$state, string $signature, array $table, bool $parsed): array
    {
        $state['signature'] = $signature;
        $state['table'] = $table;
        $state['bad_signature'] = null;
        $state['loads']++;
        $state['last_load_time'] = microtime(true);
        $state['last_error'] = null;
        if ($parsed && $this->apcu) {
            \apcu_store(self::APCU_TABLE . $this->path . "\0" . $signature, $table, self::APCU_TTL);
            \apcu_store(self::APCU_LAST_GOOD . $this->path, $table);
        }

        return $table;
    }

    /**
     * @param array<string, mixed> $state
     * @return array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}|null
     */
    private function failed(array &$state, string $signature, string $error): ?array
    {
        $state['bad_signature'] = $signature;
        $state['failed_loads']++;
        $state['last_error'] = $error;

        return $this->lastGood($state);
    }

    /**
     * @param array<string, mixed> $state
     * @return array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}|null
     */
    private function lastGood(array &$state): ?array
    {
        if ($state['table'] === null && $this->apcu) {
            // Another worker of this pool may have read a good table this one never saw.
            $lastGood = \apcu_fetch(self::APCU_LAST_GOOD . $this->path, $hit);
            if ($hit && \is_array($lastGood)) {
                $state['table'] = $lastGood;
            }
        }

        return $state['table'];
    }

    /** @param array<array-key, int> $stat */
    private static function signature(array $stat): string
    {
        return $stat['mtime'] . ':' . $stat['ino'] . ':' . $stat['size'] . ':' . $stat['dev'];
    }

    // ---- values ------------------------------------------------------------------------

    /** @return array{shard: string, origins: list<string>, weights: array<array-key, int>}|null */
    private function region(string $geo): ?array
    {
        if ($this->table === null || $geo === '' || str_starts_with($geo, 'continent/')) {
            // `region/` names no geo: an invalid key, never a route. A bucket is reached
            // only through bucket(), never by a geo's name.
            return null;
        }
        $raw = $this->table['kvs'][$this->table['prefix'] . 'region/' . $geo] ?? null;
        if ($raw === null) {
            return null; // absent: not cached, so 10 KB junk countries cost no memory
        }
        if (!\array_key_exists($geo, $this->regions)) {
            $this->regions[$geo] = RegionValue::compile($raw);
        }

        return $this->regions[$geo];
    }

    /**
     * The valid bucket region of continent $code (`region/continent/<CODE>`), if any.
     *
     * @return array{shard: string, origins: list<string>, weights: array<array-key, int>}|null
     */
    private function bucket(string $code): ?array
    {
        if ($this->table === null || !\in_array($code, self::CONTINENTS, true)) {
            return null;
        }
        $geo = 'continent/' . $code;
        $raw = $this->table['kvs'][$this->table['prefix'] . 'region/' . $geo] ?? null;
        if ($raw === null) {
            return null;
        }
        if (!\array_key_exists($geo, $this->regions)) {
            $this->regions[$geo] = RegionValue::compile($raw);
        }

        return $this->regions[$geo];
    }

    /** @return array{default: string, failover: list<string>, rendezvous: bool, continent_of: array<string, string>, valid: bool, object: array<array-key, mixed>} */
    private function compiledPolicy(): array
    {
        if ($this->policy !== null) {
            return $this->policy;
        }
        \assert($this->table !== null);
        $policy = self::DEFAULT_POLICY;
        $raw = $this->table['kvs'][$this->table['prefix'] . 'policy/global'] ?? null;
        if ($raw !== null) {
            $object = TypedJson::decode($raw);
            if (!$object instanceof JsonObject) {
                $policy['valid'] = false;
            } else {
                $fields = $object->members;
                if (\is_string($fields['default'] ?? null)) {
                    $policy['default'] = $fields['default'];
                }
                if (\is_array($fields['failover'] ?? null)) {
                    foreach ($fields['failover'] as $geo) {
                        if (\is_string($geo)) {
                            $policy['failover'][] = $geo;
                        }
                    }
                }
                $policy['rendezvous'] = ($fields['pick'] ?? null) === 'rendezvous';
                // Entries the chain cannot use are ignored, as by the extension.
                if (($fields['continent_of'] ?? null) instanceof JsonObject) {
                    foreach ($fields['continent_of']->members as $code => $continent) {
                        $code = (string) $code;
                        if (preg_match('/^[A-Z]{2}\z/', $code) === 1 && \is_string($continent)
                            && \in_array($continent, self::CONTINENTS, true)) {
                            $policy['continent_of'][$code] = $continent;
                        }
                    }
                }
                // Already known to decode: the associative form is what policy() exposes.
                $policy['object'] = (array) json_decode($raw, true, self::JSON_DEPTH);
            }
        }

        return $this->policy = $policy;
    }
}
