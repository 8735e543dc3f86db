<?php

declare(strict_types=1);

/*
 * The userland twin's routing policy (php/RegionRouter.php): docs/routing.md over one
 * table, line for line. It walks the chain (subdivision `CC-SUB`, country `CC`, the
 * continent bucket of `CC`, policy.default, policy.failover), reads `policy/global`, and
 * compiles region values lazily, only for the keys a lookup touches. No I/O: the table
 * comes from php/SnapshotCache.php; null is "no table" (no file yet), walked over no keys
 * and the default policy.
 */

namespace DwRouter;

require_once __DIR__ . '/TypedJson.php';
require_once __DIR__ . '/Continents.php';
require_once __DIR__ . '/RegionValue.php';
require_once __DIR__ . '/Buckets.php';

final class RoutingPolicy
{
    public const DEFAULT_PREFIX = '/dw/routing/';

    /** The policy when the snapshot has none. */
    private const DEFAULT_POLICY = ['default' => 'US', 'failover' => [], 'rendezvous' => false, 'continent_of' => [], 'buckets' => null, 'valid' => true, 'object' => []];

    /** The continent bucket codes (`region/continent/<CODE>`). */
    private const CONTINENTS = ['AF', 'AN', 'AS', 'EU', 'NA', 'OC', 'SA'];

    /** @var array<array-key, array{shard: string, origins: list<string>, weights: array<array-key, int>}|null> */
    private array $regions = [];

    /** @var array{default: string, failover: list<string>, rendezvous: bool, continent_of: array<string, string>, buckets: int|null, valid: bool, object: array<array-key, mixed>}|null */
    private ?array $policy = null;

    /**
     * Each answering region's effective assignment for the policy's N, computed when a
     * bucket first reaches it (by region geo).
     *
     * @var array<string, array{owners: list<int>, source: string}|null>
     */
    private array $assignments = [];

    /**
     * @param array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}|null $table
     */
    public function __construct(private readonly ?array $table)
    {
    }

    /** Visitor buckets' N (policy/global's `buckets`), null when off. */
    public function buckets(): ?int
    {
        return $this->table === null ? null : $this->compiled()['buckets'];
    }

    /** The key prefix of the table (the default one when there is no table). */
    public function prefix(): string
    {
        return $this->table['prefix'] ?? self::DEFAULT_PREFIX;
    }

    /**
     * The chain, walked: the route (null to fail open), and with $explain the steps.
     * Precedence: a sticky key, then a $bucket below N (the answering region's
     * assignment), then the country's hash key. `bucket_outcome` says what the bucket did
     * (null when none was given), in the words of dw-routing's explain.
     *
     * @return array{steps: list<array<string, mixed>>, stage: string|null, route: array{shard: string, origin: string}|null, continent: array{0: string, 1: string}|null, answered_by: string|null, hash_key: string|null, hash_key_from: string|null, bucket_kind: bool, bucket_outcome: string|null}
     */
    public function walk(string $geo, ?string $stickyKey, bool $explain, ?int $bucket = null): array
    {
        // No table (no file yet): the chain is walked over no keys and the default policy.
        $policy = $this->table === null ? self::DEFAULT_POLICY : $this->compiled();
        $prefix = $this->prefix();
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
            [$stage, $lookup, $hashKey, $isBucket] = $link;
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
                $isBucket ??= str_starts_with($lookup, 'continent/');
                if ($stage === 'geo' && str_starts_with($lookup, 'continent/')) {
                    $step['outcome'] = 'bucket namespace';
                } else {
                    $region = $isBucket ? $this->bucket(substr($lookup, \strlen('continent/'))) : $this->region($lookup);
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
                [$byBucket, $outcome] = $this->bucketUse($bucket, $stickyKey, $policy['buckets'], $lookup, $isBucket, $region);
                if ($byBucket !== null) {
                    return [
                        'steps' => $steps,
                        'stage' => $stage,
                        'route' => ['shard' => $region['shard'], 'origin' => $region['origins'][$byBucket]],
                        'continent' => $continent,
                        'answered_by' => $step['key'],
                        'hash_key' => (string) $bucket,
                        'hash_key_from' => 'bucket',
                        'bucket_kind' => true,
                        'bucket_outcome' => $outcome,
                    ];
                }
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
                    // A bucket below N counts as bucketed even where the region has no
                    // assignment (answered by the pick), as in the extension.
                    'bucket_kind' => $bucket !== null && $stickyKey === null && $policy['buckets'] !== null && $bucket < $policy['buckets'],
                    'bucket_outcome' => $outcome,
                ];
            }
        }
        $outcome = $bucket === null ? null : $this->bucketUse($bucket, $stickyKey, $policy['buckets'], null, false, null)[1];

        return ['steps' => $steps, 'stage' => null, 'route' => null, 'continent' => $continent, 'answered_by' => null, 'hash_key' => null, 'hash_key_from' => null,
            'bucket_kind' => $bucket !== null && $stickyKey === null && $policy['buckets'] !== null && $bucket < $policy['buckets'],
            'bucket_outcome' => $outcome];
    }

    /**
     * What $bucket does for the answering $region (under $lookup, null when none
     * answers): the origin index it picks, or null; and the explanation's words for it.
     *
     * @param array{shard: string, origins: list<string>, weights: array<array-key, int>, stored_buckets: mixed}|null $region
     * @return array{0: int|null, 1: string|null}
     */
    private function bucketUse(?int $bucket, ?string $stickyKey, ?int $n, ?string $lookup, bool $isBucket, ?array $region): array
    {
        if ($bucket === null) {
            return [null, null];
        }
        if ($stickyKey !== null) {
            return [null, 'ignored: a sticky key wins over a bucket'];
        }
        if ($n === null) {
            return [null, 'ignored: policy/global has no buckets (answered as without a bucket)'];
        }
        if ($bucket >= $n) {
            return [null, 'ignored: not below the policy\'s buckets (answered as without a bucket)'];
        }
        $assignment = null;
        if ($region !== null && $lookup !== null) {
            $cacheKey = ($isBucket ? "\0" : '') . $lookup;
            if (!\array_key_exists($cacheKey, $this->assignments)) {
                $weights = [];
                foreach ($region['origins'] as $origin) {
                    $weights[] = $region['weights'][$origin] ?? 0;
                }
                $this->assignments[$cacheKey] = Buckets::effective($region['stored_buckets'] ?? null, $weights, $n);
            }
            $assignment = $this->assignments[$cacheKey];
        }
        if ($assignment === null) {
            return [null, 'ignored: the answering region has no assignment (answered as without a bucket)'];
        }

        return [$assignment['owners'][$bucket], "picked by the region's assignment ({$assignment['source']})"];
    }

    /** Whether $geo has a valid region key of its own (never a bucket). */
    public function keyed(string $geo): bool
    {
        return $this->region($geo) !== null;
    }

    /**
     * The policy object as an associative array, unknown fields included; [] when the
     * policy key is missing or invalid (or there is no table).
     *
     * @return array<array-key, mixed>
     */
    public function object(): array
    {
        return $this->table === null ? [] : $this->compiled()['object'];
    }

    /**
     * The region keys that compile and those that do not (the policy key counts as
     * invalid when it is), for stats(). Compiles every region; the lookups stay lazy.
     *
     * @return array{regions: int, invalid_keys: int}
     */
    public function census(): array
    {
        $invalidKeys = 0;
        $regions = 0;
        if ($this->table !== null) {
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
            if (!$this->compiled()['valid']) {
                $invalidKeys++;
            }
        }

        return ['regions' => $regions, 'invalid_keys' => $invalidKeys];
    }

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

    /** @return array{default: string, failover: list<string>, rendezvous: bool, continent_of: array<string, string>, buckets: int|null, valid: bool, object: array<array-key, mixed>} */
    private function compiled(): array
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
                // 2 to 1024 turns buckets on; 0, absent or anything else is off (fail safe).
                $buckets = $fields['buckets'] ?? null;
                if (\is_int($buckets) && $buckets >= Buckets::MIN_BUCKETS && $buckets <= Buckets::MAX_BUCKETS) {
                    $policy['buckets'] = $buckets;
                }
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
                $policy['object'] = (array) json_decode($raw, true, TypedJson::DEPTH);
            }
        }

        return $this->policy = $policy;
    }
}
