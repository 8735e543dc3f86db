<?php

declare(strict_types=1);

/*
 * Region values for the userland twin (php/RegionRouter.php): their validation
 * (docs/routing.md, "Region validation") and the two origin picks, bit for bit as
 * dw-routing's.
 */

namespace DwRouter;

require_once __DIR__ . '/TypedJson.php';

final class RegionValue
{
    /**
     * Validates a region value (docs/routing.md, "Region validation"); null when invalid.
     *
     * @return array{shard: string, origins: list<string>, weights: array<array-key, int>, stored_buckets: array{text: string}|array{kind: string}|null}|null
     */
    public static function compile(string $raw): ?array
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
            if (!\is_int($w) || $w < 0 || $w > RegionRouter::WEIGHT_MAX) {
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
        // Visitor buckets' stored assignment: read against the policy's N by
        // Buckets::effective(), never a reason to refuse the value.
        $stored = null;
        if (\array_key_exists('buckets', $region->members)) {
            $field = $region->members['buckets'];
            $stored = \is_string($field) ? ['text' => $field] : ['kind' => self::described($field)];
        }

        return ['shard' => $shard, 'origins' => $origins, 'weights' => $weights, 'stored_buckets' => $stored];
    }

    /** A decoded JSON value's kind as dw-routing's messages say it ("is {kind}"). */
    private static function described(mixed $value): string
    {
        return match (true) {
            $value === null => 'null',
            \is_bool($value) => 'a boolean',
            \is_int($value), \is_float($value) => 'a number',
            \is_string($value) => 'a string',
            $value instanceof JsonObject => 'an object',
            default => 'an array',
        };
    }

    /**
     * The original router's expression, bit for bit: crc32 of the hash key and the listed
     * origins, modulo the sum of every weight entry (listed or not), walked in list order.
     *
     * @param list<string> $origins
     * @param array<array-key, int> $weights
     */
    public static function legacyPick(array $origins, array $weights, string $hashKey): string
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
    public static function rendezvousPick(array $origins, array $weights, string $hashKey): string
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
}
