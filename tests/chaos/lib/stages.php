<?php

declare(strict_types=1);

/*
 * The chaos checker's view of stages (docs/routing.md, "Stages"): what each node routes
 * from at a revision (php/Stages.php's overlay, the rule the agent applies, held to the
 * same cases as dw_routing::stage::overlay), the stage ops the writer made, and what
 * etcd's history says became of a stage.
 */

require_once __DIR__ . '/../../../php/Stages.php';

const DW_CHAOS_PREFIX = '/dw/routing/';

/**
 * The nodes as the run started their agents: index => [id, labels].
 *
 * @return array<int, array{0: string, 1: array<string, string>}>
 */
function dw_chaos_nodes(string $ids, string $labels, int $count): array
{
    $idList = $ids === '' ? [] : explode(',', $ids);
    $labelList = explode(';', $labels);
    $nodes = [];
    for ($n = 1; $n <= $count; $n++) {
        $set = [];
        foreach (explode(',', $labelList[$n - 1] ?? '') as $pair) {
            if (str_contains($pair, '=')) {
                [$k, $v] = explode('=', $pair, 2);
                $set[trim($k)] = trim($v);
            }
        }
        $nodes[$n] = [$idList[$n - 1] ?? '', $set];
    }
    return $nodes;
}

/** Whether a state (the prefix's keys) holds any stage key. */
function dw_chaos_has_stages(array $state): bool
{
    foreach ($state as $key => $_) {
        if (str_starts_with((string) $key, DW_CHAOS_PREFIX . 'stage/')) {
            return true;
        }
    }
    return false;
}

/**
 * What a node routes from: the state with the node's stages in place (no node id: no
 * stage), keys sorted, and the ids of the stages applied.
 *
 * @param array{0: string, 1: array<string, string>}|null $node
 * @return array{0: array<string, string>, 1: list<string>}
 */
function dw_chaos_effective(array $state, ?array $node): array
{
    $overlay = \DwRouter\Stages::overlay($state, DW_CHAOS_PREFIX, $node === null || $node[0] === '' ? null : $node[0], $node[1] ?? []);
    return [$overlay['kvs'], array_column($overlay['stages'], 'id')];
}

/**
 * The writer's stage ops (writes.log lines "... <rc> <rev> stage <what> ..."): what =>
 * exit code => count.
 *
 * @param list<string> $lines
 * @return array<string, array<string, int>>
 */
function dw_chaos_stage_ops(array $lines): array
{
    $ops = [];
    foreach ($lines as $line) {
        $f = explode(' ', $line, 7);
        if (count($f) >= 6 && $f[4] === 'stage') {
            $ops[$f[5]][$f[2]] = ($ops[$f[5]][$f[2]] ?? 0) + 1;
        }
    }
    ksort($ops);
    return $ops;
}

/**
 * What the history says became of stage `id`: the revision it was first written at, the
 * revision its key was deleted at, and how: promoted (in that revision every key of its
 * last record became current with the staged shard and origins), aborted (no routing key
 * changed in that revision), or neither (null: a direct write or a drain took its last
 * key).
 *
 * @param list<array{0: int, 1: string, 2: string|null}> $events
 * @return array{created: int|null, closed: int|null, promoted: bool|null}
 */
function dw_chaos_stage_fate(array $events, string $id): array
{
    $key = DW_CHAOS_PREFIX . "stage/$id";
    $created = null;
    $closed = null;
    $last = null;
    foreach ($events as [$rev, $k, $value]) {
        if ($k !== $key || $closed !== null) {
            continue;
        }
        if ($value !== null) {
            $created ??= $rev;
            $last = $value;
        } elseif ($created !== null) {
            $closed = $rev;
        }
    }
    if ($closed === null || $last === null) {
        return ['created' => $created, 'closed' => $closed, 'promoted' => null];
    }
    $changed = [];
    foreach ($events as [$rev, $k, $value]) {
        if ($rev === $closed && !str_starts_with($k, DW_CHAOS_PREFIX . 'stage/')) {
            $changed[substr($k, strlen(DW_CHAOS_PREFIX))] = $value;
        }
    }
    if ($changed === []) {
        return ['created' => $created, 'closed' => $closed, 'promoted' => false];
    }
    $stage = \DwRouter\Stages::parse($id, $last);
    // the fields that route (promote writes the value again, with its own `updated`)
    $routing = function (?string $value): ?array {
        $v = json_decode((string) $value, true);
        return is_array($v) ? array_intersect_key($v, array_flip(['shard', 'origins', 'weight', 'default', 'failover', 'pick'])) : null;
    };
    $same = fn (?string $a, ?string $b): bool => $a === $b || ($routing($a) !== null && $routing($a) === $routing($b));
    $promoted = is_array($stage);
    foreach (is_array($stage) ? $stage['kvs'] : [] as $relative => $value) {
        $promoted = $promoted && array_key_exists($relative, $changed) && $same($changed[$relative], $value);
    }
    return ['created' => $created, 'closed' => $closed, 'promoted' => $promoted ? true : null];
}
