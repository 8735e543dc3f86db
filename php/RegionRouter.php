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

    /** @var array{default: string, failover: list<string>, rendezvous: bool, valid: bool, object: array<array-key, mixed>}|null */
    private ?array $policy = null;

    /**
     * @param array{fallback_shard?: string, fallback_origin?: string, apcu?: bool, max_snapshot_bytes?: int} $options
     */
    public function __construct(?string $snapshotPath = null, array $options = [])
    {
        $this->path = $snapshotPath ?? self::iniString('dw_router.snapshot_path') ?? self::DEFAULT_SNAPSHOT_PATH;
        $this->fallbackShard = self::stringOption($options, 'fallback_shard')
            ?? self::iniString('dw_router.fallback_shard') ?? self::DEFAULT_FALLBACK_SHARD;
        $this->fallbackOrigin = self::stringOption($options, 'fallback_origin')
            ?? self::iniString('dw_router.fallback_origin') ?? self::DEFAULT_FALLBACK_ORIGIN;
        $apcuAvailable = \function_exists('apcu_enabled') && \apcu_enabled();
        $this->apcu = $apcuAvailable && (bool) ($options['apcu'] ?? true);
        $max = $options['max_snapshot_bytes'] ?? self::iniBytes('dw_router.max_snapshot_bytes');
        $this->maxSnapshotBytes = \is_int($max) && $max > 0 ? $max : self::DEFAULT_MAX_SNAPSHOT_BYTES;

        self::$paths[$this->path] ??= self::freshState();
        $this->table = $this->load();
    }

    /**
     * Routes one request. Never raises; any byte string is a valid country.
     *
     * @return array{shard: string, origin: string}
     */
    public function resolve(string $country, ?string $stickyKey = null): array
    {
        $this->answeredRevision = $this->table['revision'] ?? 0;
        if ($this->table !== null) {
            $hashKey = $stickyKey ?? $country;
            $policy = $this->compiledPolicy();
            foreach ([$country, $policy['default'], ...$policy['failover']] as $geo) {
                $region = $this->region($geo);
                if ($region !== null) {
                    $origin = $policy['rendezvous']
                        ? self::rendezvousPick($region['origins'], $region['weights'], $hashKey)
                        : self::legacyPick($region['origins'], $region['weights'], $hashKey);

                    return ['shard' => $region['shard'], 'origin' => $origin];
                }
            }
        }

        return ['shard' => $this->fallbackShard, 'origin' => $this->fallbackOrigin];
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
                    $this->region(substr($key, \strlen($regionPrefix))) === null ? $invalidKeys++ : $regions++;
                }
            }
            $policy = $this->compiledPolicy();
            if (!$policy['valid']) {
                $invalidKeys++;
            }
        }

        return [
            'loads' => $state['loads'],
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
        $table = self::parseSnapshot($raw);
        if (\is_string($table)) {
            return $this->failed($state, $signature, $table);
        }

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

    /**
     * Parses a whole snapshot file (docs/snapshot-format.md).
     *
     * @return array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}|string the table, or why the file is refused
     */
    private static function parseSnapshot(string $raw): array|string
    {
        if ($raw === '') {
            return 'snapshot is empty';
        }
        $document = TypedJson::decode($raw);
        if (!$document instanceof JsonObject) {
            return 'snapshot is not a JSON object';
        }
        $fields = $document->members;
        foreach (['format', 'revision', 'kvs'] as $required) {
            if (!\array_key_exists($required, $fields)) {
                return "snapshot lacks `$required`";
            }
        }
        if ($fields['format'] !== self::SNAPSHOT_FORMAT) {
            return 'unsupported snapshot format';
        }
        if (!\is_int($fields['revision']) || $fields['revision'] < 0) {
            return 'revision is not a non-negative integer';
        }
        // `prefix` is optional; null counts as absent, any other non-string refuses the file.
        $prefix = $fields['prefix'] ?? self::DEFAULT_PREFIX;
        if (!\is_string($prefix)) {
            return 'prefix is not a string';
        }
        if (!$fields['kvs'] instanceof JsonObject) {
            return 'kvs is not an object';
        }
        foreach ($fields['kvs']->members as $value) {
            if (!\is_string($value)) {
                return 'kvs holds a non-string value';
            }
        }

        /** @var array<array-key, string> $kvs */
        $kvs = $fields['kvs']->members;

        return ['revision' => $fields['revision'], 'prefix' => $prefix, 'kvs' => $kvs,
            'stages' => self::appliedStages($fields['stages'] ?? null)];
    }

    /**
     * The snapshot's optional `stages` field (the stages its agent applied): a list of
     * {id: string, revision: int >= 0}. Informative: any other shape is taken as none.
     *
     * @return list<array{id: string, revision: int}>
     */
    private static function appliedStages(mixed $field): array
    {
        if (!\is_array($field) || !array_is_list($field)) {
            return [];
        }
        $stages = [];
        foreach ($field as $stage) {
            $id = $stage instanceof JsonObject ? ($stage->members['id'] ?? null) : null;
            $revision = $stage instanceof JsonObject ? ($stage->members['revision'] ?? null) : null;
            if (!\is_string($id) || !\is_int($revision) || $revision < 0) {
                return [];
            }
            $stages[] = ['id' => $id, 'revision' => $revision];
        }

        return $stages;
    }

    // ---- values ------------------------------------------------------------------------

    /** @return array{shard: string, origins: list<string>, weights: array<array-key, int>}|null */
    private function region(string $geo): ?array
    {
        \assert($this->table !== null);
        if ($geo === '') {
            return null; // `region/` names no geo: an invalid key, never a route
        }
        $raw = $this->table['kvs'][$this->table['prefix'] . 'region/' . $geo] ?? null;
        if ($raw === null) {
            return null; // absent: not cached, so 10 KB junk countries cost no memory
        }
        if (!\array_key_exists($geo, $this->regions)) {
            $this->regions[$geo] = self::compileRegion($raw);
        }

        return $this->regions[$geo];
    }

    /**
     * Validates a region value (docs/routing.md, "Region validation"); null when invalid.
     *
     * @return array{shard: string, origins: list<string>, weights: array<array-key, int>}|null
     */
    private static function compileRegion(string $raw): ?array
    {
        $region = TypedJson::decode($raw);
        if (!$region instanceof JsonObject) {
            return null;
        }
        $shard = $region->members['shard'] ?? null;
        if (!\is_string($shard) || $shard === '') {
            return null;
        }
        $origins = $region->members['origins'] ?? null;
        if (!\is_array($origins) || $origins === []) {
            return null;
        }
        $listed = [];
        foreach ($origins as $origin) {
            if (!\is_string($origin) || $origin === '' || isset($listed[$origin])) {
                return null;
            }
            $listed[$origin] = true;
        }
        $weight = $region->members['weight'] ?? null;
        if (!$weight instanceof JsonObject) {
            return null;
        }
        foreach ($weight->members as $w) {
            if (!\is_int($w) || $w < 0 || $w > self::WEIGHT_MAX) {
                return null;
            }
        }
        $anyPositive = false;
        foreach ($origins as $origin) {
            if (($weight->members[$origin] ?? 0) > 0) {
                $anyPositive = true;
                break;
            }
        }
        if (!$anyPositive) {
            return null;
        }

        /** @var list<string> $origins */
        /** @var array<array-key, int> $weights */
        $weights = $weight->members;

        return ['shard' => $shard, 'origins' => $origins, 'weights' => $weights];
    }

    /** @return array{default: string, failover: list<string>, rendezvous: bool, valid: bool, object: array<array-key, mixed>} */
    private function compiledPolicy(): array
    {
        if ($this->policy !== null) {
            return $this->policy;
        }
        \assert($this->table !== null);
        $policy = ['default' => 'US', 'failover' => [], 'rendezvous' => false, 'valid' => true, 'object' => []];
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
                // Already known to decode: the associative form is what policy() exposes.
                $policy['object'] = (array) json_decode($raw, true, self::JSON_DEPTH);
            }
        }

        return $this->policy = $policy;
    }

    // ---- picks -------------------------------------------------------------------------

    /**
     * The original router's expression, bit for bit: crc32 of the hash key and the listed
     * origins, modulo the sum of every weight entry (listed or not), walked in list order.
     *
     * @param list<string> $origins
     * @param array<array-key, int> $weights
     */
    private static function legacyPick(array $origins, array $weights, string $hashKey): string
    {
        $point = crc32($hashKey . implode('', $origins)) % (array_sum($weights) ?: 1);
        foreach ($origins as $origin) {
            $point -= $weights[$origin] ?? 0;
            if ($point < 0) {
                return $origin;
            }
        }

        return $origins[0];
    }

    /**
     * Weighted rendezvous hashing: the listed origin with a positive weight and the
     * greatest w / -ln(u), u drawn from xxh3(hashKey . "\0" . origin); earliest on a tie.
     *
     * @param list<string> $origins
     * @param array<array-key, int> $weights
     */
    private static function rendezvousPick(array $origins, array $weights, string $hashKey): string
    {
        $best = null;
        $bestScore = 0.0;
        foreach ($origins as $origin) {
            $w = $weights[$origin] ?? 0;
            if ($w <= 0) {
                continue;
            }
            $h = hexdec(substr(hash('xxh3', $hashKey . "\0" . $origin), 0, 13));
            $u = ($h + 0.5) / 2 ** 52;
            $score = $w / -log($u);
            if ($best === null || $score > $bestScore) {
                $best = $origin;
                $bestScore = $score;
            }
        }

        // A compiled region always has a listed origin with a positive weight.
        return $best ?? $origins[0];
    }

    // ---- configuration -----------------------------------------------------------------

    /** @param array<string, mixed> $options */
    private static function stringOption(array $options, string $name): ?string
    {
        $value = $options[$name] ?? null;

        return \is_string($value) && $value !== '' ? $value : null;
    }

    private static function iniString(string $name): ?string
    {
        $value = \ini_get($name);

        return \is_string($value) && $value !== '' ? $value : null;
    }

    private static function iniBytes(string $name): ?int
    {
        $value = self::iniString($name);
        if ($value === null || preg_match('/^\s*(\d+)\s*([kKmMgG]?)\s*$/', $value, $m) !== 1) {
            return null;
        }
        $shift = ['' => 0, 'k' => 10, 'm' => 20, 'g' => 30][strtolower($m[2])];

        return (int) $m[1] << $shift;
    }
}
