<?php

declare(strict_types=1);

/*
 * The chaos test's writer: random valid routing changes through dwctl at a steady rate,
 * until STOP_FILE exists. One line per attempt on stdout:
 *   <mono_ns before> <mono_ns after> <exit code> <revision or -> <op...>
 * The revision is the one dwctl reports it committed at (--output json); "-" when it wrote
 * nothing (no change, refused) or failed (etcd unavailable: the outcome is then unknown,
 * and etcd's history, not this log, says whether it happened).
 *
 * Stages (dwctl stage create/widen/promote/abort, docs/dwctl.md) come in two kinds:
 * - fixed ones, so that even a short run has them ($fixed, below): stage chaos-p1 is created
 *   on op 2 (regions only the load asks for and no random write touches, named nodes),
 *   widened, and promoted (with --rebase should promote exit 3); chaos-a1 is created on
 *   op 4 and aborted. An op whose outcome is unknown (exit 1) is tried again on the next
 *   op, until it is done or its stage gone;
 * - random ones, 6 % of the other ops (create with a few random regions and sometimes
 *   policy/global, cohort by percentage, node ids or labels; widen; promote, sometimes
 *   with --rebase, exit 3 an expected outcome; abort), at most 3 stages open at once.
 * Stage files are written beside STOP_FILE.
 *
 *   php writer.php DWCTL ENDPOINTS SEED INTERVAL_MS STOP_FILE [NODE_IDS]
 * NODE_IDS: the nodes' --node-id, comma-separated (default chaos-n1,chaos-n2,chaos-n3).
 */

[, $dwctl, $endpoints, $seed, $intervalMs, $stopFile, $nodeIds] = $argv + array_fill(0, 7, null);
$nodeIds = explode(',', (string) ($nodeIds ?? 'chaos-n1,chaos-n2,chaos-n3'));
mt_srand((int) $seed);
$origins = ['fra-a', 'fra-b', 'ams-a', 'lon-a', 'iad-a', 'iad-b', 'gru-a', 'nrt-a', 'sin-a'];
$geos = ['DE', 'AT', 'CH', 'FR', 'GB', 'NL', 'SE', 'PL', 'BR', 'MX', 'US', 'CA', 'JP', 'IN', 'SG', 'IT', 'ES',
    'continent/EU', 'continent/AF', 'continent/SA', 'US-CA'];
$shards = ['eu-1', 'eu-2', 'us-1', 'us-2', 'sa-1', 'ap-1'];
$pick = fn (array $a) => $a[mt_rand(0, count($a) - 1)];

function dwctl(string $dwctl, string $endpoints, array $args): array
{
    $cmd = array_merge([$dwctl, '--endpoints', $endpoints, '--output', 'json', '--timeout', '2', '--retries', '3'], $args);
    $before = hrtime(true);
    $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    $out = stream_get_contents($pipes[1]);
    $err = stream_get_contents($pipes[2]);
    fclose($pipes[1]);
    fclose($pipes[2]);
    $rc = proc_close($proc);
    $after = hrtime(true);
    $json = json_decode((string) $out, true);
    $revision = is_array($json) && is_int($json['revision'] ?? null) ? $json['revision'] : null;
    // an error's text, wherever --output json puts it
    $text = trim((string) $err) !== '' ? trim((string) $err) : ($rc !== 0 ? trim((string) $out) : '');
    return [$before, $after, $rc, $revision, $text];
}

$drained = [];
$interval = max(10, (int) $intervalMs) * 1000;
$stageDir = dirname((string) $stopFile);
$region = function () use ($pick, $origins, $shards): array {
    $set = $origins;
    shuffle($set);
    $set = array_slice($set, 0, mt_rand(1, 3));
    $weight = [];
    foreach ($set as $k => $o) {
        $weight[$o] = $k === 0 ? mt_rand(1, 100) : mt_rand(0, 100);
    }
    return ['shard' => $pick($shards), 'origins' => $set, 'weight' => $weight];
};
// A stage file of these regions (and a policy), written beside STOP_FILE: its path.
$stageFile = function (string $name, array $regions, ?array $policy = null) use ($stageDir): string {
    $doc = ['regions' => $regions];
    if ($policy !== null) {
        $doc['policy'] = $policy;
    }
    $path = "$stageDir/$name.json";
    file_put_contents($path, json_encode($doc, JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR));
    return $path;
};
// The fixed stage ops: op number => args; one whose outcome is unknown is tried again next.
// Their regions are ones no random write sets, with four origins each, so that only a
// drain of all four at once (a staged value a drain would empty leaves its stage) could
// take a key out of them before their promote and abort.
$fixed = [
    2 => ['stage', 'create', $stageFile('chaos-p1', [
        'AR' => ['shard' => 'sa-9', 'origins' => ['gru-a', 'iad-a', 'iad-b', 'lon-a'], 'weight' => ['gru-a' => 70, 'iad-a' => 30, 'iad-b' => 10, 'lon-a' => 5]],
        'DE-BY' => ['shard' => 'eu-9', 'origins' => ['fra-b', 'ams-a', 'fra-a', 'lon-a'], 'weight' => ['fra-b' => 50, 'ams-a' => 50, 'fra-a' => 20, 'lon-a' => 0]],
        'SI' => ['shard' => 'eu-8', 'origins' => ['ams-a', 'lon-a', 'fra-b', 'sin-a'], 'weight' => ['ams-a' => 10, 'lon-a' => 90, 'fra-b' => 30, 'sin-a' => 5]],
    ]), '--id', 'chaos-p1', '--nodes', "$nodeIds[0],$nodeIds[2]", '--reason', 'chaos'],
    4 => ['stage', 'create', $stageFile('chaos-a1', [
        'KE' => ['shard' => 'ap-9', 'origins' => ['sin-a', 'nrt-a', 'fra-a', 'gru-a'], 'weight' => ['sin-a' => 60, 'nrt-a' => 40, 'fra-a' => 15, 'gru-a' => 5]],
        'PT-11' => ['shard' => 'eu-7', 'origins' => ['lon-a', 'fra-a', 'ams-a', 'iad-b'], 'weight' => ['lon-a' => 80, 'fra-a' => 20, 'ams-a' => 20, 'iad-b' => 1]],
    ]), '--id', 'chaos-a1', '--nodes', $nodeIds[1], '--reason', 'chaos'],
    30 => ['stage', 'widen', 'chaos-p1', '--cohort', '50%', '--reason', 'chaos'],
    60 => ['stage', 'promote', 'chaos-p1', '--reason', 'chaos'],
    70 => ['stage', 'abort', 'chaos-a1', '--reason', 'chaos'],
];
$pending = []; // fixed ops due, oldest first
$tries = []; // fixed op => times tried again (at most 20)
$stages = []; // open stage ids (as far as this writer knows) => true
$stageSeq = 0;
for ($n = 0; $n < 1000000 && !file_exists((string) $stopFile); $n++) {
    $roll = mt_rand(1, 100);
    if (isset($fixed[$n])) {
        $pending[] = $fixed[$n];
    }
    if ($pending !== []) {
        $args = array_shift($pending);
    } elseif ($roll <= 6) {
        $ids = array_keys($stages);
        $open = array_values(array_filter($ids, fn ($id) => !str_starts_with((string) $id, 'chaos-p') && !str_starts_with((string) $id, 'chaos-a')));
        $what = $open === [] || (count($stages) < 3 && mt_rand(1, 3) === 1) ? 'create' : $pick(['widen', 'promote', 'promote', 'abort']);
        if ($what === 'create') {
            $regions = [];
            for ($k = mt_rand(1, 3); $k > 0; $k--) {
                $regions[$pick($geos)] = $region();
            }
            $policy = mt_rand(1, 4) === 1 ? ['default' => $pick($geos), 'failover' => [$pick($geos)], 'pick' => $pick(['legacy', 'rendezvous'])] : null;
            $id = sprintf('chaos-r%d', ++$stageSeq);
            $args = ['stage', 'create', $stageFile($id, $regions, $policy), '--id', $id, '--reason', 'chaos'];
            $cohort = mt_rand(1, 3);
            if ($cohort === 1) {
                array_push($args, '--cohort', mt_rand(1, 99) . '%');
            } elseif ($cohort === 2) {
                array_push($args, '--nodes', $pick($nodeIds));
            } else {
                array_push($args, '--labels', 'site=fra');
            }
        } else {
            $id = $pick($open);
            $args = match ($what) {
                'widen' => ['stage', 'widen', $id, '--cohort', mt_rand(50, 100) . '%', '--reason', 'chaos'],
                'promote' => array_merge(['stage', 'promote', $id, '--reason', 'chaos'], mt_rand(1, 3) === 1 ? ['--rebase'] : []),
                default => ['stage', 'abort', $id, '--reason', 'chaos'],
            };
        }
    } elseif ($roll <= 25) {
        $origin = $pick($origins);
        $args = ['drain', $origin, '--reason', 'chaos'];
        if (mt_rand(1, 3) === 1) {
            array_push($args, '--region', $pick($geos));
        }
    } elseif ($roll <= 45 && $drained !== []) {
        $args = ['restore', $pick(array_keys($drained))];
    } elseif ($roll <= 85) {
        $geo = $pick($geos);
        $set = $origins;
        shuffle($set);
        $set = array_slice($set, 0, mt_rand(1, 4));
        $args = ['region', 'set', $geo, '--shard', $pick($shards)];
        foreach ($set as $i => $o) {
            // at least the first origin carries weight; others may be 0
            $args[] = '--origin';
            $args[] = $o . '=' . ($i === 0 ? mt_rand(1, 100) : mt_rand(0, 100));
        }
    } elseif ($roll <= 88) {
        $args = ['region', 'delete', $pick($geos)];
    } else {
        $failover = [];
        for ($i = mt_rand(0, 3); $i > 0; $i--) {
            $failover[] = $pick($geos);
        }
        $policy = ['default' => $pick(array_merge($geos, ['ZZ'])), 'failover' => $failover,
            'pick' => $pick(['legacy', 'rendezvous'])];
        if (mt_rand(1, 3) === 1) {
            // Kenya and Slovenia moved between continent buckets.
            $policy['continent_of'] = [$pick(['KE', 'SI']) => $pick(['EU', 'AF', 'SA'])];
        }
        $args = ['policy', 'set', json_encode($policy)];
    }
    [$before, $after, $rc, $revision, $err] = dwctl((string) $dwctl, (string) $endpoints, $args);
    if ($rc === 0 && $args[0] === 'drain') {
        $drained[$args[1]] = true;
    } elseif ($rc === 0 && $args[0] === 'restore') {
        unset($drained[$args[1]]);
    } elseif ($rc === 4 && $args[0] === 'restore') {
        unset($drained[$args[1]]);
    } elseif ($args[0] === 'stage') {
        $id = $args[1] === 'create' ? $args[4] : $args[2];
        if ($rc === 0 && $args[1] === 'create') {
            $stages[$id] = true;
        } elseif (($rc === 0 && in_array($args[1], ['promote', 'abort'], true)) || str_contains($err, 'no open stage')) {
            unset($stages[$id]);
        } elseif ($rc === 1 && $args[1] === 'create' && str_contains($err, 'is open already')) {
            $stages[$id] = true; // an earlier try, its outcome unknown, committed
        } elseif ($rc === 3 && $args[1] === 'promote' && $id === 'chaos-p1' && !in_array('--rebase', $args, true)) {
            // promote's guard saw a staged key changed outside the stage: the fixed stage
            // is promoted anyway, as an operator would after `stage show`
            array_unshift($pending, array_merge($args, ['--rebase']));
        } elseif ($rc === 1 && in_array($id, ['chaos-p1', 'chaos-a1'], true) && ($tries[$args[1] . $id] = ($tries[$args[1] . $id] ?? 0) + 1) < 20) {
            // A fixed op whose outcome is unknown (etcd unavailable): again on the next op.
            array_unshift($pending, $args);
        }
    }
    $op = implode(' ', array_map(fn ($a) => str_replace(' ', '_', $a), $args));
    printf("%d %d %d %s %s%s\n", $before, $after, $rc, $revision ?? '-', $op,
        $rc !== 0 && $rc !== 4 && $err !== '' ? ' # ' . str_replace("\n", ' | ', substr($err, 0, 200)) : '');
    fflush(STDOUT);
    $spent = (int) (($after - $before) / 1000);
    if ($spent < $interval) {
        usleep($interval - $spent);
    }
}
