<?php

declare(strict_types=1);

/*
 * The differential test's random snapshots (tests/differential/differential.php): a
 * seeded generator of routing states, their edge cases and their JSON.
 */

/** Forces a JSON object (empty, list-keyed or NUL-keyed members included). */
final class Obj
{
    public function __construct(public array $members)
    {
    }
}

final class Gen
{
    public const COMMON_GEOS = ['DE', 'FR', 'GB', 'US', 'BR', 'NL', 'JP', 'ES', 'IT', 'CA', 'AU', 'IN', 'MX', 'SE', 'PL'];
    public const ODD_GEOS = ['', 'de', 'Us', '0', '1', '01', '-1', '1.0', ' GB', 'D E', "D\0E", "\0", 'Ü', '日本',
        'X/Y', 'region/DE', 'policy/global', '\\', '"', '..'];
    /** The geography chain's geos: subdivisions, countries whose codes are also continent
     * codes, documented choices, no-continent codes, buckets valid and not. */
    public const CHAIN_GEOS = ['US-CA', 'DE-BY', 'GB-ENG', 'PT-11', 'XX-1', 'AS', 'NA', 'SA', 'AF', 'TR', 'RU', 'PT',
        'XX', 'T1', 'continent/EU', 'continent/NA', 'continent/AS', 'continent/SA', 'continent/AF',
        'continent/OC', 'continent/AN', 'continent/ZZ', 'continent/eu', 'continent/'];
    /** Geos looked up that have keys only through the chain. */
    public const CHAIN_QUERIES = ['PT', 'SI', 'KE', 'US-NY', 'DE-BY', 'US-CA', 'XX', 'T1', 'AS', 'NA', 'TR', 'CY',
        'RU', 'XK', 'ZZ', 'DE-', 'DE-ABCD', 'de-BY', 'continent/EU', 'continent/', 'GB-ENG'];
    public const ORIGINS = ['fra-a', 'fra-b', 'ams-a', 'lon-a', 'gru-a', 'iad-a', 'sjc-a', 'sin-a'];
    public const ODD_ORIGINS = ['0', '1', '10', "\0n", 'ü', 'a"b', 'a\\b', ' ', 'fra-a ', "x\0"];
    public const SHARDS = ['eu-1', 'eu-2', 'latam-1', 'us-1', 'us-2', 'apac-1'];

    private Random\Randomizer $random;

    public function __construct(int $seed, private readonly bool $edges)
    {
        $this->random = new Random\Randomizer(new Random\Engine\Xoshiro256StarStar($seed));
    }

    public function chance(float $p): bool
    {
        return $this->random->getFloat(0, 1) < $p;
    }

    public function int(int $min, int $max): int
    {
        return $this->random->getInt($min, $max);
    }

    /** @template T @param list<T> $items @return T */
    public function pick(array $items): mixed
    {
        return $items[$this->random->getInt(0, count($items) - 1)];
    }

    public function bytes(int $length): string
    {
        return $length === 0 ? '' : $this->random->getBytes($length);
    }

    /** @return list<mixed> up to $count distinct items of $pool, in random order */
    public function distinct(array $pool, int $count): array
    {
        if ($count <= 0 || $pool === []) {
            return [];
        }
        $keys = $this->random->pickArrayKeys($pool, min($count, count($pool)));

        return array_map(static fn ($k) => $pool[$k], $this->random->shuffleArray($keys));
    }

    /** @return list<mixed> */
    public function shuffle(array $items): array
    {
        return $this->random->shuffleArray($items);
    }

    public function geo(): string
    {
        return $this->chance(0.75) ? $this->pick(self::COMMON_GEOS) : $this->pick(self::ODD_GEOS);
    }

    /**
     * JSON text with a layout and escaping chosen per document: lists are arrays, other
     * PHP arrays and Obj are objects (keys as given, even NUL-led ones).
     */
    public function json(mixed $value): string
    {
        $flags = JSON_THROW_ON_ERROR | JSON_PRESERVE_ZERO_FRACTION
            | ($this->chance(0.5) ? JSON_UNESCAPED_SLASHES : 0)
            | ($this->chance(0.5) ? JSON_UNESCAPED_UNICODE : 0);
        $space = $this->chance(0.15);

        return self::encode($value, $flags, $space ? ', ' : ',', $space ? ': ' : ':');
    }

    private static function encode(mixed $value, int $flags, string $comma, string $colon): string
    {
        if (is_array($value) && array_is_list($value)) {
            return '[' . implode($comma, array_map(static fn ($v) => self::encode($v, $flags, $comma, $colon), $value)) . ']';
        }
        if (is_array($value) || $value instanceof Obj) {
            $members = is_array($value) ? $value : $value->members;
            $parts = [];
            foreach ($members as $k => $v) {
                $parts[] = json_encode((string) $k, $flags) . $colon . self::encode($v, $flags, $comma, $colon);
            }

            return '{' . implode($comma, $parts) . '}';
        }

        return json_encode($value, $flags);
    }

    /** Adds a member at the end (or the start) of an object's JSON text. */
    public static function withMember(string $objectText, string $member, bool $first = false): string
    {
        if (preg_match('/^\{\s*\}$/', $objectText) === 1) {
            return '{' . $member . '}';
        }

        return $first ? '{' . $member . ',' . substr($objectText, 1) : substr($objectText, 0, -1) . ',' . $member . '}';
    }

    /** A nested unknown-field value. */
    public function junk(int $depth = 0): mixed
    {
        $kind = $this->int(0, $depth > 2 ? 5 : 7);

        return match ($kind) {
            0 => null,
            1 => $this->chance(0.5),
            2 => $this->int(-1_000_000, 1_000_000),
            3 => $this->pick([1.5, 0.1, -2.5e-3, 100.0, 3.0e10, 0.0, 123456.789]),
            4 => $this->pick(['', 'x', 'ü', "\0", 'a"b', '2026-11-30T08:00:00Z', "\u{1F600}", '\\u0000']),
            5 => $this->chance(0.5) ? [] : new Obj([]),
            6 => array_map(fn () => $this->junk($depth + 1), range(1, $this->int(1, 3))),
            default => new Obj(array_combine(
                $keys = $this->distinct(['a', 'b', '0', '1', '', "\0k", 'é', 'default', 'shard'], 3),
                array_map(fn () => $this->junk($depth + 1), $keys),
            )),
        };
    }

    /** Text of a number edge case (a plain integer when edges are off). */
    public function edgeNumber(): string
    {
        if (!$this->edges) {
            return (string) $this->int(-5, 5);
        }

        return $this->pick(['-0', '-0.0', '0e0', '1E2', '1e400', '-1e400', '1e-400', '9223372036854775807',
            '9223372036854775808', '18446744073709551615', '18446744073709551616', '1.7976931348623157e308',
            '5e-324', '0.30000000000000004', '-9223372036854775808', '0.1e1']);
    }

    /**
     * A region value: a valid region, possibly mutated into an invalid or odd one.
     *
     * @param list<string> $originPool
     * @return array{0: string, 1: string} [JSON text, what was done to it]
     */
    public function region(array $originPool): array
    {
        if ($this->chance(0.04)) {
            $bad = ['', '{', '}', 'nope', '[]', '{}', 'null', 'true', '1', '"eu-1"', '[{"shard":"eu-1"}]',
                "\xef\xbb\xbf{}", '{"shard":"eu-1",}', '{} {}', '{"shard":"\ud800"}', "{\"shard\":\"a\tb\"}"];

            return [$this->pick($bad), 'not a region'];
        }
        $origins = $this->distinct($originPool, $this->int(1, 4));
        $weights = [];
        foreach ($origins as $origin) {
            $weights[$origin] = $this->pick([0, 1, 5, 10, 20, 30, 50, 60, 100, 1000, 1_000_000, $this->int(0, 1000)]);
        }
        if (max($weights) === 0) {
            $weights[$origins[0]] = $this->int(1, 100);
        }
        // Weight stays a PHP array while mutated; $weightIsObject says how it is written.
        $region = ['shard' => $this->pick(self::SHARDS), 'origins' => $origins, 'weight' => $weights];
        $weightIsObject = true;
        if ($this->chance(0.5)) {
            $region['updated'] = '2026-11-30T08:' . sprintf('%02d', $this->int(0, 59)) . ':00Z';
        }
        $notes = [];
        $textEdits = [];
        $mutations = $this->chance(0.6) ? 0 : $this->int(1, 2);
        for ($i = 0; $i < $mutations; $i++) {
            $m = $this->int(0, 26);
            $originList = is_array($region['origins'] ?? null) ? $region['origins'] : null;
            $weightArray = $weightIsObject && is_array($region['weight'] ?? null);
            $firstWeighted = $weightArray ? array_key_first($region['weight']) : null;
            $firstWeight = $firstWeighted === null ? null : $region['weight'][$firstWeighted];
            $notes[] = "m$m";
            switch ($m) {
                case 0: unset($region['shard']); break;
                case 1: $region['shard'] = $this->pick(['', 5, null, ['eu-1'], true, 'eu-9']); break;
                case 2: unset($region['origins']); break;
                case 3: $region['origins'] = []; break;
                case 4: $region['origins'] = new Obj($originList ?? ['a']); break; // {"0": ...}
                case 5: if ($originList !== null) { $region['origins'][] = $this->pick(['', 5, null, ['a'], 'fra-a']); } break;
                case 6: if ($originList !== null && $originList !== []) { $region['origins'][] = $originList[0]; } break;
                case 7: $region['origins'] = $originList[0] ?? 'fra-a'; break; // a string
                case 8: unset($region['weight']); break;
                case 9: $region['weight'] = $this->pick([[], [5], null, 'fra-a', 5, [['fra-a' => 1]]]); $weightIsObject = false; break;
                case 10: $region['weight'] = []; break; // {}
                case 11: if (is_int($firstWeight)) { $region['weight'][$firstWeighted] = (float) $region['weight'][$firstWeighted]; } break;
                case 12: if (is_int($firstWeight)) { $region['weight'][$firstWeighted] = (string) $region['weight'][$firstWeighted]; } break;
                case 13: if ($firstWeighted !== null) { $region['weight'][$firstWeighted] = $this->pick([-1, true, false, null, 1_000_001, PHP_INT_MAX, 2.5, [1]]); } break;
                case 14: if ($weightArray) { $region['weight'][$this->pick(['zzz', 'unlisted', '0', "\0u", ''])] = $this->int(0, 200); } break;
                case 15: if ($weightArray) { $region['weight'] = array_map(static fn () => 0, $region['weight']); } break;
                case 16: if ($weightArray) { $region['weight'] = ['zzz' => 50]; } break;
                case 17: if ($firstWeighted !== null) { unset($region['weight'][$firstWeighted]); } break;
                case 18: if ($firstWeighted !== null) { $region['weight'][$firstWeighted] = 1_000_000; } break;
                case 19: $region[$this->pick(['x', 'note', 'weights', 'Shard', "\0z", ''])] = $this->junk(); break;
                case 20: $textEdits[] = 'dup-shard-first'; break;
                case 21: $textEdits[] = 'dup-shard-last'; break;
                case 22: $textEdits[] = 'dup-weight-last'; break;
                case 23: $textEdits[] = 'exp-weight'; break;
                case 24: $textEdits[] = 'edge-weight'; break;
                case 25: $textEdits[] = 'deep'; break;
                case 26: $textEdits[] = $this->pick(['escaped-names', 'truncate']); break;
            }
        }
        if ($weightIsObject && is_array($region['weight'] ?? null)) {
            $region['weight'] = new Obj($region['weight']);
        }
        $text = $this->json($region);
        foreach ($textEdits as $edit) {
            $depth = $this->edges ? $this->pick([100, 127, 128, 129, 300, 510, 511, 512, 600]) : $this->int(1, 100);
            $text = match ($edit) {
                'dup-shard-first' => self::withMember($text, '"shard":"first-' . $this->int(0, 9) . '"', true),
                'dup-shard-last' => self::withMember($text, '"shard":"last-' . $this->int(0, 9) . '"'),
                'dup-weight-last' => self::withMember($text, '"weight":{' . json_encode($origins[0]) . ':' . $this->int(0, 3) . '}'),
                'exp-weight' => preg_replace('/("weight":\s*\{\s*"(?:[^"\\\\]|\\\\.)*":\s*)(\d+)/', '${1}${2}e0', $text, 1),
                'edge-weight' => preg_replace('/("weight":\s*\{\s*"(?:[^"\\\\]|\\\\.)*":\s*)-?\d+/', '${1}' . $this->edgeNumber(), $text, 1),
                'deep' => self::withMember($text, '"deep":' . str_repeat('[', $depth) . '1' . str_repeat(']', $depth)),
                'escaped-names' => str_replace(['"shard"', '"origins"', '"weight"'], ['"\u0073hard"', '"origin\u0073"', '"w\u0065ight"'], $text),
                'truncate' => substr($text, 0, $this->int(0, max(0, strlen($text) - 1))),
            } ?? $text;
        }

        return [$text, $notes === [] ? 'valid' : implode(',', $notes) . ($textEdits === [] ? '' : ' ' . implode(',', $textEdits))];
    }

    /**
     * @param list<string> $geos
     * @return array{0: ?string, 1: string} [policy JSON text or null for none, description]
     */
    public function policy(array $geos): array
    {
        if ($this->chance(0.15)) {
            return [null, 'no policy'];
        }
        if ($this->chance(0.07)) {
            return [$this->pick(['[]', '{', '"x"', 'null', '[{"default":"DE"}]', '', '1', '{"default":"DE",}']), 'invalid policy'];
        }
        $policy = [];
        if ($this->chance(0.8)) {
            $policy['default'] = $this->chance(0.85)
                ? ($this->chance(0.7) && $geos !== [] ? $this->pick($geos) : $this->geo())
                : $this->pick([5, null, ['DE'], true]);
        }
        if ($this->chance(0.7)) {
            $failover = [];
            for ($i = $this->int(0, 4); $i > 0; $i--) {
                $failover[] = $this->chance(0.85)
                    ? ($this->chance(0.6) && $geos !== [] ? $this->pick($geos) : $this->geo())
                    : $this->pick([5, null, ['GB'], false, 1.5]);
            }
            $policy['failover'] = $this->chance(0.9) ? $failover : ($this->chance(0.5) ? new Obj($failover) : 'GB');
        }
        if ($this->chance(0.8)) {
            $policy['pick'] = $this->chance(0.85)
                ? $this->pick(['rendezvous', 'rendezvous', 'legacy'])
                : $this->pick(['Rendezvous', 'rendezvous ', '', 'hrw', 5, null, ['rendezvous']]);
        }
        if ($this->chance(0.5)) {
            $policy['honor_client_hints'] = $this->chance(0.5);
        }
        if ($this->chance(0.3)) {
            $overrides = [];
            for ($i = $this->int(0, 4); $i > 0; $i--) {
                $overrides[$this->pick(['TR', 'CY', 'RU', 'PT', 'AS', 'XX', 'T1', 'tr', '12'])]
                    = $this->pick(['EU', 'AS', 'AF', 'NA', 'XX', 'eu', 5, null]);
            }
            $policy['continent_of'] = $this->chance(0.9) ? new Obj($overrides) : ['EU'];
        }
        for ($i = $this->int(0, 3); $i > 0; $i--) {
            $policy[$this->pick(['x', 'note', 'owner', '0', '1', '', "\0p", 'é', 'Default'])] = $this->junk();
        }
        $text = $this->json(new Obj($policy));
        $note = 'policy';
        if ($this->chance(0.1)) {
            $text = self::withMember($text, '"default":' . json_encode($this->geo()));
            $note .= ' dup-default';
        }
        if ($this->chance(0.15)) {
            $text = self::withMember($text, '"n":' . $this->edgeNumber());
            $note .= ' number';
        }

        return [$text, $note];
    }

    /**
     * A whole snapshot file.
     *
     * @return array{text: string, geos: list<string>, notes: array<string, string>}
     */
    public function snapshot(): array
    {
        $prefixChoice = $this->int(0, 9);
        [$prefixField, $prefix] = match (true) {
            $prefixChoice <= 4 => [null, '/dw/routing/'],
            $prefixChoice === 5 => ['"/dw/routing/"', '/dw/routing/'],
            $prefixChoice === 6 => ['"/other/"', '/other/'],
            $prefixChoice === 7 => ['""', ''],
            $prefixChoice === 8 => ['"/dw/routing"', '/dw/routing'],
            default => ['null', '/dw/routing/'],
        };
        $originPool = $this->chance(0.8) ? self::ORIGINS : array_merge(self::ORIGINS, self::ODD_ORIGINS);
        $geos = $this->distinct(array_merge(self::COMMON_GEOS, $this->chance(0.5) ? self::ODD_GEOS : [],
            $this->chance(0.5) ? self::CHAIN_GEOS : []), $this->int(0, 20));
        $pairs = [];
        $notes = [];
        foreach ($geos as $geo) {
            [$value, $note] = $this->region($originPool);
            $pairs[] = [$prefix . 'region/' . $geo, $value];
            $notes[$geo] = $note;
        }
        [$policy, $policyNote] = $this->policy($geos);
        $notes['(policy)'] = $policyNote;
        if ($policy !== null) {
            $pairs[] = [$prefix . 'policy/global', $policy];
        }
        foreach ($this->distinct(self::ORIGINS, $this->int(0, 3)) as $origin) {
            $pairs[] = [$prefix . 'origin/' . $origin, '{"addr":"10.0.0.1:443"}'];
        }
        if ($this->chance(0.2)) {
            // Keys that must not route: other prefixes, NUL-led and numeric keys.
            $pairs[] = [$this->pick(['/elsewhere/region/DE', "\0x", '0', '12', 'region/US']), '{"shard":"stray","origins":["a"],"weight":{"a":1}}'];
        }
        $pairs = $this->shuffle($pairs);
        if ($this->chance(0.1) && $pairs !== []) {
            // A duplicate key in the kvs object: the last one wins.
            $pairs[] = [$pairs[0][0], $this->region($originPool)[0]];
            $notes['(kvs)'] = 'duplicate key ' . $pairs[0][0];
        }
        $kvs = '{' . implode(',', array_map(fn (array $p) => $this->json($p[0]) . ':' . $this->json($p[1]), $pairs)) . '}';
        $revision = $this->pick([0, 1, $this->int(2, 1_000_000), $this->int(0, PHP_INT_MAX)]);
        $fields = ['"format":1', '"revision":' . $revision, '"kvs":' . $kvs];
        if ($prefixField !== null) {
            $fields[] = '"prefix":' . $prefixField;
        }
        if ($this->chance(0.1)) {
            $fields[] = '"written_by":' . $this->json($this->junk());
        }
        $text = '{' . implode(',', $this->shuffle($fields)) . '}';
        if ($this->chance(0.04)) {
            // Unreadable as a whole: both sides must have no table.
            $text = $this->pick([
                '',
                substr($text, 0, intdiv(strlen($text), 2)),
                str_replace('"format":1', '"format":2', $text),
                str_replace('"format":1', '"format":1.0', $text),
                str_replace('"revision":' . $revision, '"revision":-1', $text),
                str_replace('"revision":' . $revision, '"revision":"' . $revision . '"', $text),
                str_replace('"kvs":{', '"kvs":{"bad":5,', $text),
                '[' . $text . ']',
                $prefixField === null ? self::withMember($text, '"prefix":5') : $text,
            ]);
            $notes['(file)'] = 'broken file';
        } elseif ($this->edges && $this->chance(0.02)) {
            $text = $this->pick([
                str_replace('"revision":' . $revision, '"revision":18446744073709551615', $text),
                str_replace('"revision":' . $revision, '"revision":-0', $text),
                self::withMember($text, '"deep":' . str_repeat('[', 200) . str_repeat(']', 200)),
                self::withMember($text, '"format":1'),
            ]);
            $notes['(file)'] = 'edge file';
        }

        return ['text' => $text, 'geos' => $geos, 'notes' => $notes];
    }

    /** A country to look up. */
    public function country(array $snapshot): string
    {
        $geos = $snapshot['geos'];
        $r = $this->int(0, 99);

        return match (true) {
            $r < 35 && $geos !== [] => $this->pick($geos),
            $r < 45 => $this->pick(self::CHAIN_QUERIES),
            $r < 50 => $this->geo(),
            $r < 60 => $this->pick(self::COMMON_GEOS),
            $r < 65 => '',
            $r < 68 => $this->bytes(10240),
            $r < 71 => str_repeat('A', 10240),
            $r < 76 => $this->pick(["\0", "DE\0", "\0DE", "D\0E"]) . ($this->chance(0.5) ? $this->bytes($this->int(0, 3)) : ''),
            $r < 82 => $this->pick(["\xff", "\xc3", "\xed\xa0\x80", "\xfe\xff", "D\xe9"]),
            $r < 90 && $geos !== [] => $this->pick([strtolower(...), strtoupper(...), static fn ($g) => " $g", static fn ($g) => "$g\0"])($this->pick($geos)),
            default => $this->bytes($this->int(1, 4)),
        };
    }

    public function stickyKey(string $country): ?string
    {
        $r = $this->int(0, 99);

        return match (true) {
            $r < 50 => null,
            $r < 75 => 'visitor-' . $this->int(0, 1_000_000),
            $r < 85 => $this->bytes($this->int(0, 40)),
            $r < 88 => '',
            $r < 90 => $this->bytes(10240),
            $r < 95 => $country,
            default => bin2hex($this->bytes(16)),
        };
    }
}
