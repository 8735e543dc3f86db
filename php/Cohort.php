<?php

declare(strict_types=1);

/*
 * The staged-rollout cohort function (docs/routing.md, "Stages"), for PHP code that must
 * know which nodes a stage reaches (the chaos checker, tests, dashboards): the same point
 * as dw_routing::stage::cohort_point.
 *
 *   point = xxh3_64(stage_id . "\0" . node_id) % 10000
 *
 * PHP's integers are signed and hexdec() turns 64-bit values into floats, so the unsigned
 * remainder is taken from the two 32-bit halves: 2^32 % 10000 = 7296.
 *
 * \DwCohort, its name before it moved into the namespace, stays an alias: PHP code outside
 * this repository (dashboards) and tests/differential/twin-selftest.php use it.
 */

namespace DwRouter;

final class Cohort
{
    public const POINTS = 10000;

    public static function point(string $stageId, string $nodeId): int
    {
        $hex = hash('xxh3', $stageId . "\0" . $nodeId);
        $high = (int) hexdec(substr($hex, 0, 8));
        $low = (int) hexdec(substr($hex, 8, 8));

        return (($high % self::POINTS) * 7296 + $low) % self::POINTS;
    }

    /**
     * Whether a node is in a cohort ({points, nodes, labels}: a union).
     *
     * @param array{points?: int, nodes?: list<string>, labels?: array<string, string>} $cohort
     * @param array<string, string> $labels the node's labels
     */
    public static function contains(array $cohort, string $stageId, string $nodeId, array $labels): bool
    {
        $points = $cohort['points'] ?? 0;
        if ($points > 0 && self::point($stageId, $nodeId) < $points) {
            return true;
        }
        if (\in_array($nodeId, $cohort['nodes'] ?? [], true)) {
            return true;
        }
        $want = $cohort['labels'] ?? [];
        if ($want === []) {
            return false;
        }
        foreach ($want as $key => $value) {
            if (($labels[$key] ?? null) !== $value) {
                return false;
            }
        }

        return true;
    }
}

\class_alias(Cohort::class, 'DwCohort');
