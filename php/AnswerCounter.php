<?php

declare(strict_types=1);

/*
 * The userland twin's answer counting (php/RegionRouter.php): every resolve() counts one
 * answer under its labels (docs/traffic.md, "The labels"), per process, or across the
 * workers of a pool through APCu where APCu is enabled (docs/traffic.md, "The userland
 * twin"). RegionRouter::traffic() reads them back. The twin writes no counter file, so
 * dw-agent serves none of these counts.
 */

namespace DwRouter;

require_once __DIR__ . '/Continents.php';
require_once __DIR__ . '/CacheTags.php';
require_once __DIR__ . '/RoutingPolicy.php';

final class AnswerCounter
{
    private const APCU_ANSWERS = 'dw_router:answers:';
    /** The longest label value; a longer one is cut to this many bytes, the last `~`. */
    private const MAX_LABEL_BYTES = 128;

    /**
     * This process's answers per label set ("geo\0step\0key\0origin\0shard\0kind", the
     * kind as the extension's code: 0 plain, 1 sticky, 2 bucket, so that the rows sort
     * alike), when APCu does not hold them.
     *
     * @var array<string, int>
     */
    private static array $answers = [];

    /** The kinds (`kind` label) by code, as in the counter file (dw_traffic::AnswerKind). */
    private const KINDS = ['plain', 'sticky', 'bucket'];

    /** @param bool $apcu whether the counts live in APCu (shared by the pool) */
    public function __construct(private readonly bool $apcu)
    {
    }

    /**
     * Counts one answer: $step is where in the chain it came from (`fail_open` for the
     * fallback route), $answeredBy the full key of the answering region (null for
     * `fail_open`), $routing the policy over the table that answered, $kind how the origin
     * was picked (plain, sticky, bucket).
     *
     * @param array{shard: string, origin: string} $route
     * @param 'plain'|'sticky'|'bucket' $kind
     */
    public function count(RoutingPolicy $routing, string $geo, string $step, ?string $answeredBy, array $route, string $kind): void
    {
        $prefix = $routing->prefix() . 'region/';
        $key = $answeredBy === null ? '' : CacheTags::encodeKey(substr($answeredBy, \strlen($prefix)));
        $labels = self::geoLabel($routing, $geo) . "\0$step\0$key\0" . self::cut($route['origin']) . "\0"
            . self::cut($route['shard']) . "\0" . (int) array_search($kind, self::KINDS, true);
        if ($this->apcu) {
            if (\apcu_inc(self::APCU_ANSWERS . $labels, 1) === false) {
                \apcu_add(self::APCU_ANSWERS . $labels, 1) || \apcu_inc(self::APCU_ANSWERS . $labels, 1);
            }

            return;
        }
        self::$answers[$labels] = (self::$answers[$labels] ?? 0) + 1;
    }

    /**
     * The answers counted, per label set, in byte order of the label sets, as the
     * extension's traffic() lists them.
     *
     * @return list<array{geo: string, step: string, key: string, origin: string, shard: string, kind: string, sticky: bool, answers: int}>
     */
    public function rows(): array
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
            [$geo, $step, $key, $origin, $shard, $code] = explode("\0", (string) $labels);
            $kind = self::KINDS[(int) $code] ?? 'plain';
            $rows[] = ['geo' => $geo, 'step' => $step, 'key' => $key, 'origin' => $origin, 'shard' => $shard,
                'kind' => $kind, 'sticky' => $kind === 'sticky', 'answers' => $answers];
        }

        return $rows;
    }

    /** Where the counts live, as traffic()'s `state` says it. */
    public function state(): string
    {
        return $this->apcu ? 'userland, APCu' : 'userland, this process';
    }

    /** The `geo` label: a built-in code or a key of the table; a keyless `CC-SUB` as `CC`. */
    private static function geoLabel(RoutingPolicy $routing, string $geo): string
    {
        if ($geo === '') {
            return 'empty';
        }
        $known = fn (string $code): bool => isset(Continents::CONTINENT_OF[$code]) || $code === 'XX' || $code === 'T1'
            || $routing->keyed($code);
        if (preg_match('/^[A-Z0-9]{2}\z/', $geo) === 1) {
            return $known($geo) ? $geo : 'other';
        }
        if ($routing->keyed($geo)) {
            return self::cut(CacheTags::encodeKey($geo));
        }
        if (preg_match('/^([A-Z]{2})-[A-Z0-9]{1,3}\z/', $geo, $m) === 1) {
            return $known($m[1]) ? $m[1] : 'other';
        }

        return 'other';
    }

    /** A label value cut to 128 bytes, the last being `~`, as the extension's. */
    private static function cut(string $value): string
    {
        return \strlen($value) <= self::MAX_LABEL_BYTES ? $value : substr($value, 0, self::MAX_LABEL_BYTES - 1) . '~';
    }
}
