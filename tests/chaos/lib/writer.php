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
 *   php writer.php DWCTL ENDPOINTS SEED INTERVAL_MS STOP_FILE
 */

[, $dwctl, $endpoints, $seed, $intervalMs, $stopFile] = $argv + array_fill(0, 6, null);
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
    return [$before, $after, $rc, $revision, trim((string) $err)];
}

$drained = [];
$interval = max(10, (int) $intervalMs) * 1000;
for ($n = 0; $n < 1000000 && !file_exists((string) $stopFile); $n++) {
    $roll = mt_rand(1, 100);
    if ($roll <= 25) {
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
