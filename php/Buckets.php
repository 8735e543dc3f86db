<?php

declare(strict_types=1);

/*
 * Visitor buckets (docs/routing.md, "Buckets") for the userland twin and PHP tools: the
 * same functions as dw_routing::buckets, with the same results and the same error
 * messages, both held to crates/routing/tests/bucket-cases.json (the Rust side in
 * crates/routing/tests/it/bucket_cases.rs, this one in tests/differential/twin-selftest.php).
 *
 * An assignment is a list of N origin indices (bucket 0 first), each an index into the
 * region's `origins`; Rust holds the same as runs. Its text form is `ORIGIN:COUNT` runs
 * joined by `,` (decimal, no leading zeros, neighbours never of one origin). The twin's
 * RoutingPolicy answers a bucket by effective() (Rust: effective_assignment). No I/O, no
 * extension beyond what `--disable-all` keeps.
 *
 *     $n = \DwRouter\Buckets::checkCount(1024);
 *     $assignment = \DwRouter\Buckets::defaultAssignment([50, 50], $n);
 *     $drained = \DwRouter\Buckets::reassign($assignment, [0, 50]);
 *     echo \DwRouter\Buckets::encode($drained); // 1:1024
 */

namespace DwRouter;

final class Buckets
{
    public const MIN_BUCKETS = 2;
    public const MAX_BUCKETS = 1024;
    /** The most listed origins a bucketed region may have (Rust keeps an index in 16 bits). */
    public const MAX_ASSIGNED_ORIGINS = 65536;
    /** The longest encoded assignment decode() reads: 1,024 runs like `12345:1`, comma-joined. */
    public const MAX_ENCODED_BYTES = 8 * self::MAX_BUCKETS - 1;
    /** The most digits of a run's numbers. */
    private const MAX_RUN_DIGITS = 5;

    /** N when it is from 2 to 1024 (BucketCount::new). */
    public static function checkCount(int $n): int
    {
        if ($n < self::MIN_BUCKETS || $n > self::MAX_BUCKETS) {
            throw new BucketError('policy', 'buckets', "is $n, not an integer from " . self::MIN_BUCKETS . ' to ' . self::MAX_BUCKETS);
        }

        return $n;
    }

    /**
     * Each origin's number of the $n buckets: the largest-remainder method, leftover buckets
     * to the largest remainders `w * n mod S`, equal ones to the origin listed first.
     *
     * @param list<int> $weights the listed origins' weights, in list order (0 to 2^32 - 1)
     * @return list<int>
     */
    public static function apportion(array $weights, int $n): array
    {
        self::checkCount($n);
        if (\count($weights) > self::MAX_ASSIGNED_ORIGINS) {
            throw new BucketError('region', 'origins', 'lists ' . \count($weights) . ' origins; a bucketed region lists at most ' . self::MAX_ASSIGNED_ORIGINS);
        }
        $sum = 0;
        foreach ($weights as $weight) {
            if (!\is_int($weight) || $weight < 0 || $weight > 0xFFFFFFFF) {
                throw new \InvalidArgumentException('a weight is an integer from 0 to 2^32 - 1');
            }
            $sum += $weight;
        }
        if ($sum === 0) {
            throw new BucketError('region', 'weight', 'no listed origin has a positive weight');
        }
        $counts = [];
        $remainders = [];
        $given = 0;
        foreach (array_values($weights) as $weight) {
            $scaled = $weight * $n;
            $quota = intdiv($scaled, $sum);
            $given += $quota;
            $counts[] = $quota;
            $remainders[] = $scaled % $sum;
        }
        // Largest remainder first, then the origin listed first: a total order.
        $order = array_keys($counts);
        array_multisort($remainders, SORT_DESC, SORT_NUMERIC, $order, SORT_ASC, SORT_NUMERIC);
        for ($i = 0; $i < $n - $given; $i++) {
            $counts[$order[$i]]++;
        }

        return $counts;
    }

    /**
     * The apportioned counts as contiguous blocks in list order.
     *
     * @param list<int> $weights
     * @return list<int>
     */
    public static function defaultAssignment(array $weights, int $n): array
    {
        return self::blocks(self::apportion($weights, $n));
    }

    /**
     * The text form of an assignment.
     *
     * @param list<int> $owners
     */
    public static function encode(array $owners): string
    {
        $runs = [];
        $origin = null;
        $count = 0;
        foreach ($owners as $owner) {
            if ($owner === $origin) {
                $count++;
                continue;
            }
            if ($origin !== null) {
                $runs[] = "$origin:$count";
            }
            [$origin, $count] = [$owner, 1];
        }
        if ($origin !== null) {
            $runs[] = "$origin:$count";
        }

        return implode(',', $runs);
    }

    /**
     * Reads the text form as hostile input, in the same order of checks as Rust's
     * Assignment::decode (so the same message): length, empty, each run (syntax, origin,
     * count, like its neighbour, the total past N), the total short of N.
     *
     * @return list<int>
     */
    public static function decode(string $text, int $n, int $originCount): array
    {
        $n = self::checkCount($n);
        if (\strlen($text) > self::MAX_ENCODED_BYTES) {
            throw self::refused('is ' . \strlen($text) . ' bytes; an encoded assignment is at most ' . self::MAX_ENCODED_BYTES);
        }
        if ($text === '') {
            throw self::refused('is empty');
        }
        $owners = [];
        $previous = null;
        foreach (explode(',', $text) as $index => $run) {
            if (preg_match('/\A(0|[1-9][0-9]{0,4}):(0|[1-9][0-9]{0,4})\z/', $run, $m) !== 1) {
                throw self::refused("run $index is not ORIGIN:COUNT (decimal integers of at most " . self::MAX_RUN_DIGITS . ' digits, without sign or leading zeros)');
            }
            [$origin, $count] = [(int) $m[1], (int) $m[2]];
            if ($origin >= $originCount) {
                throw self::refused("run $index gives origin $origin; the region lists $originCount origins");
            }
            if ($count === 0) {
                throw self::refused("run $index counts no bucket");
            }
            if ($origin === $previous) {
                throw self::refused("run $index gives origin $origin as the run before it does: one run");
            }
            if (\count($owners) + $count > $n) {
                throw self::refused("covers more than the policy's $n buckets (at run $index)");
            }
            array_push($owners, ...array_fill(0, $count, $origin));
            $previous = $origin;
        }
        if (\count($owners) < $n) {
            throw self::refused('covers ' . \count($owners) . " buckets, not the policy's $n");
        }

        return $owners;
    }

    /**
     * The assignment a region answers its visitors' buckets with when the policy has $n
     * buckets (dw_routing::buckets::effective_assignment, docs/routing.md "Buckets"):
     * $stored is the value's `buckets` field (`['text' => string]` for a string,
     * `['kind' => 'a number']` for another JSON type, null when absent), $weights the
     * listed origins' weights in list order. Absent: the default; a string that decodes
     * for ($n, the origins): itself when its counts are the apportionment, else reassigned
     * to it; anything else: the default, with why it was ignored. Null when the region
     * cannot have one (more origins than an assignment indexes).
     *
     * @param array{text: string}|array{kind: string}|null $stored
     * @param list<int> $weights
     * @return array{owners: list<int>, source: string}|null source as explain() says it
     */
    public static function effective(?array $stored, array $weights, int $n): ?array
    {
        try {
            $default = self::defaultAssignment($weights, $n);
        } catch (BucketError) {
            return null;
        }
        if ($stored === null) {
            return ['owners' => $default, 'source' => 'default'];
        }
        try {
            if (!isset($stored['text'])) {
                throw self::refused('is ' . ($stored['kind'] ?? 'null') . ', not a string');
            }
            $decoded = self::decode($stored['text'], $n, \count($weights));
        } catch (BucketError $error) {
            return ['owners' => $default, 'source' => 'default, the stored one ignored: ' . $error->getMessage()];
        }
        $owners = self::reassign($decoded, $weights);

        return ['owners' => $owners, 'source' => $owners === $decoded ? 'stored' : 'stored, reassigned to the current weights'];
    }

    /**
     * The origin index of $bucket, null when it is not below N.
     *
     * @param list<int> $owners
     */
    public static function originOf(array $owners, int $bucket): ?int
    {
        return $owners[$bucket] ?? null;
    }

    /**
     * The next assignment after the weights of the same listed origins change, moving
     * exactly the sum of the decreases (docs/routing.md, "Buckets", for the rule).
     *
     * @param list<int> $stored
     * @param list<int> $weights
     * @return list<int>
     */
    public static function reassign(array $stored, array $weights): array
    {
        $counts = self::apportion($weights, \count($stored));
        $owners = [];
        foreach ($stored as $origin) {
            if ($origin >= \count($weights)) {
                throw self::refused("gives a bucket to origin $origin; the region lists " . \count($weights) . ' origins');
            }
            $owners[] = $origin;
        }

        return self::rebalance($owners, $counts);
    }

    /**
     * reassign() across a change of the origin list: buckets follow their origin by name,
     * those of an origin no longer listed are freed.
     *
     * @param list<int> $stored indexes $storedOrigins
     * @param list<string> $storedOrigins
     * @param list<string> $origins
     * @param list<int> $weights $origins' weights
     * @return list<int> indexes $origins
     */
    public static function reassignByName(array $stored, array $storedOrigins, array $origins, array $weights): array
    {
        if (\count($weights) !== \count($origins)) {
            throw new BucketError('region', 'weight', 'gives ' . \count($weights) . ' weights for ' . \count($origins) . ' origins');
        }
        $counts = self::apportion($weights, \count($stored));
        $newIndex = [];
        foreach (array_values($origins) as $index => $name) {
            if (isset($newIndex[$name])) {
                throw self::listedTwice($name);
            }
            $newIndex[$name] = $index;
        }
        $oldNames = [];
        foreach ($storedOrigins as $name) {
            if (isset($oldNames[$name])) {
                throw self::listedTwice($name);
            }
            $oldNames[$name] = true;
        }
        $owners = [];
        foreach ($stored as $origin) {
            if (!isset($storedOrigins[$origin])) {
                throw new BucketError('region', 'origins', "the stored assignment gives a bucket to origin $origin; " . \count($storedOrigins) . ' were listed');
            }
            $owners[] = $newIndex[$storedOrigins[$origin]] ?? null;
        }

        return self::rebalance($owners, $counts);
    }

    /**
     * @param list<int> $counts
     * @return list<int>
     */
    private static function blocks(array $counts): array
    {
        $owners = [];
        foreach ($counts as $origin => $count) {
            for ($i = 0; $i < $count; $i++) {
                $owners[] = $origin;
            }
        }

        return $owners;
    }

    /**
     * $owners (null: a bucket whose origin is gone) brought to exactly $counts: surplus
     * freed (first buckets the default gives to another origin, then the rest, highest
     * bucket first), freed buckets (lowest first) to their default origin while it lacks
     * buckets, then to the origins still lacking, in list order.
     *
     * @param list<int|null> $owners
     * @param list<int> $counts
     * @return list<int>
     */
    private static function rebalance(array $owners, array $counts): array
    {
        $default = self::blocks($counts);
        $held = array_fill(0, \count($counts), 0);
        foreach ($owners as $origin) {
            if ($origin !== null) {
                $held[$origin]++;
            }
        }
        $surplus = [];
        $deficit = [];
        foreach ($counts as $origin => $count) {
            $surplus[$origin] = max(0, $held[$origin] - $count);
            $deficit[$origin] = max(0, $count - $held[$origin]);
        }
        foreach ([false, true] as $keepHome) {
            for ($bucket = \count($owners) - 1; $bucket >= 0; $bucket--) {
                $origin = $owners[$bucket];
                if ($origin !== null && $surplus[$origin] > 0 && ($default[$bucket] === $origin) === $keepHome) {
                    $surplus[$origin]--;
                    $owners[$bucket] = null;
                }
            }
        }
        foreach ($owners as $bucket => $origin) {
            $home = $default[$bucket];
            if ($origin === null && $deficit[$home] > 0) {
                $deficit[$home]--;
                $owners[$bucket] = $home;
            }
        }
        $next = 0;
        foreach ($owners as $bucket => $origin) {
            if ($origin === null) {
                while ($deficit[$next] === 0) {
                    $next++;
                }
                $deficit[$next]--;
                $owners[$bucket] = $next;
            }
        }

        return $owners;
    }

    private static function refused(string $reason): BucketError
    {
        return new BucketError('region', 'buckets', $reason);
    }

    /** As Rust's `{:?}` of the name cut to 64 bytes, for names of printable ASCII. */
    private static function listedTwice(string $name): BucketError
    {
        if (\strlen($name) > 64) {
            $end = 64;
            while ($end > 0 && (\ord($name[$end]) & 0xC0) === 0x80) {
                $end--;
            }
            $name = substr($name, 0, $end) . '…';
        }

        return new BucketError('region', 'origins', 'origin ' . json_encode($name, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE) . ' is listed twice');
    }
}

/**
 * A refused input, with dw_routing::Error's message: "region: field `buckets`: is empty".
 */
final class BucketError extends \DomainException
{
    /** @param 'region'|'policy' $kind */
    public function __construct(public readonly string $kind, public readonly string $field, public readonly string $reason)
    {
        parent::__construct("$kind: field `$field`: $reason");
    }
}
