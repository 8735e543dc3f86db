<?php

declare(strict_types=1);

/*
 * The chaos test's checker. Rebuilds etcd's history of the routing prefix from a watch
 * started before anything was written (etcdctl watch --rev 1 -w json), and for every
 * answer the load generator recorded recomputes the route with the userland twin
 * (DwRouter\RegionRouter) from a snapshot built, in docs/snapshot-format.md's format, from
 * the effective state at the answer's revision of the node that served it: the prefix's
 * keys with that node's stages in place (tests/chaos/lib/stages.php, the agent's overlay
 * rule), so that answers from staged values are checked too; at least one must have been
 * served, and the writer's fixed stages must have been promoted and aborted. Also: no worker's revision goes backwards;
 * after the nemesis stopped, every node served the final revision within 1 s of it being
 * committed; staleness (commit acknowledged by dwctl -> the node's last answer from an
 * older revision) during faults and outside. Prints "CHECK ok|FAIL <what>" lines and the
 * figures; writes them as Markdown to --markdown.
 *
 *   php check.php --log DIR --nodes N --final-rev R --final-ns T [--seed S --duration D]
 *                 [--markdown FILE] [--tmp DIR] [--node-ids ID,ID,..] [--node-labels 'k=v,..;..']
 * DIR holds history.jsonl, writes.log, faults.log, records-node<i>.<thread>, final-kvs.json.
 */

require __DIR__ . '/../../../php/RegionRouter.php';
require __DIR__ . '/../../lib/revision-order.php';
require __DIR__ . '/stages.php';
require __DIR__ . '/twin.php';

$opts = getopt('', ['log:', 'nodes:', 'final-rev:', 'final-ns:', 'seed:', 'duration:', 'markdown:', 'tmp:', 'servers:',
    'socket-errors:', 'partition:', 'load-end-ns:', 'node-ids:', 'node-labels:']);
$loadEnd = (int) ($opts['load-end-ns'] ?? 0);
$log = (string) ($opts['log'] ?? '.');
$nodes = (int) ($opts['nodes'] ?? 3);
$finalRev = (int) ($opts['final-rev'] ?? 0);
$finalNs = (int) ($opts['final-ns'] ?? 0);
$tmp = (string) ($opts['tmp'] ?? sys_get_temp_dir());
$servers = explode(',', (string) ($opts['servers'] ?? ''));
$nodeInfo = dw_chaos_nodes((string) ($opts['node-ids'] ?? ''), (string) ($opts['node-labels'] ?? ''), $nodes);
$checks = [];
$check = function (bool $ok, string $what) use (&$checks): void {
    $checks[] = [$ok, $what];
    echo $ok ? 'CHECK ok   ' : 'CHECK FAIL ', $what, "\n";
};

// ---- etcd's history ----------------------------------------------------------------------
$events = []; // [mod_revision, key, value|null]
$lastRev = 0;
$historyLines = 0;
$fh = fopen("$log/history.jsonl", 'r');
while ($fh && ($line = fgets($fh)) !== false) {
    $line = trim($line);
    if ($line === '' || $line[0] !== '{') {
        continue;
    }
    $historyLines++;
    $r = json_decode($line, true);
    foreach ($r['Events'] ?? [] as $e) {
        $kv = $e['kv'];
        $rev = (int) $kv['mod_revision'];
        $events[] = [$rev, base64_decode($kv['key']), ($e['type'] ?? 0) === 1 || ($e['type'] ?? '') === 'DELETE' ? null : base64_decode($kv['value'] ?? '')];
    }
}
$ordered = true;
for ($i = 1; $i < count($events); $i++) {
    if ($events[$i][0] < $events[$i - 1][0]) {
        $ordered = false;
    }
}
$lastRev = $events === [] ? 0 : end($events)[0];
// The history's final state against a range read at the end.
$state = [];
foreach ($events as [$rev, $key, $value]) {
    if ($value === null) { unset($state[$key]); } else { $state[$key] = $value; }
}
$final = json_decode((string) @file_get_contents("$log/final-kvs.json"), true);
$finalKvs = [];
foreach ($final['kvs'] ?? [] as $kv) {
    $finalKvs[base64_decode($kv['key'])] = base64_decode($kv['value'] ?? '');
}
ksort($state, SORT_STRING);
ksort($finalKvs, SORT_STRING);
$check($ordered && $events !== [] && $state === $finalKvs,
    sprintf('history: %d events up to revision %d, in order; replayed it equals etcd\'s final range read (%d keys)',
        count($events), $lastRev, count($finalKvs)));

// ---- the faults ----------------------------------------------------------------------------
$faults = []; // [kind, node|'', start, end]
foreach (@file("$log/faults.log", FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [] as $line) {
    $f = explode(' ', $line, 5);
    if (count($f) >= 4 && ctype_digit($f[2]) && ctype_digit($f[3])) {
        $faults[] = [$f[0], $f[1], (int) $f[2], (int) $f[3]];
    }
}
$faultKinds = [];
foreach ($faults as [$kind]) {
    $faultKinds[$kind] = ($faultKinds[$kind] ?? 0) + 1;
}
ksort($faultKinds);
$inFault = function (int $t, ?string $kind = null, ?string $node = null, int $grace = 1_000_000_000) use ($faults): bool {
    foreach ($faults as [$k, $n, $s, $e]) {
        if (($kind === null || $k === $kind) && ($node === null || $n === $node) && $t >= $s && $t <= $e + $grace) {
            return true;
        }
    }
    return false;
};

// The fault whose window (start to heal) meets the moments from $from to $to, the latest
// started of them; null when none does.
$faultDuring = function (int $from, int $to) use ($faults): ?string {
    $found = null;
    $latest = -1;
    foreach ($faults as [$k, $n, $s, $e]) {
        if ($from <= $e && $to >= $s && $s > $latest) {
            [$found, $latest] = [$k, $s];
        }
    }
    return $found;
};

// The fault a moment belongs to: the latest one started by then whose window (until 1 s
// after it healed) covers it, i.e. whose window meets the moments from $t - $grace to $t.
$faultAt = fn (int $t, int $grace = 1_000_000_000): ?string => $faultDuring($t - $grace, $t);

// ---- the writes ----------------------------------------------------------------------------
$writes = []; // revision => ack ns
$writeCount = 0;
$writeRc = [];
$writeWhere = [];
$calmFailures = [];
foreach (@file("$log/writes.log", FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [] as $line) {
    $f = explode(' ', $line, 5);
    if (count($f) < 5) {
        continue;
    }
    $writeCount++;
    $writeRc[$f[2]] = ($writeRc[$f[2]] ?? 0) + 1;
    // exit 1 (etcd unavailable, outcome unknown) during a fault of a member or outside any:
    // a write is in a fault when its time (start to end) meets the fault's window, so that a
    // write that began just before a member was killed counts with the faults.
    $met = $faultDuring((int) $f[0], (int) $f[1]);
    $where = in_array($met, ['kill-leader', 'kill-follower', 'partition'], true) ? 'down' : ($met === null ? 'calm' : 'other');
    $writeWhere[$where][0] = ($writeWhere[$where][0] ?? 0) + 1;
    // Exit 1 is also "not found" (a random op on a region or stage that is gone): only
    // dwctl's etcd errors ("dwctl: etcd...", after " # ") count as unavailable.
    $etcdDown = $f[2] === '1' && str_contains($f[4], '# dwctl: etcd');
    $etcdDown && $writeWhere[$where][1] = ($writeWhere[$where][1] ?? 0) + 1;
    if ($etcdDown && $where === 'calm') {
        // What dwctl said (after " # "), printable ASCII only: it names the member and why.
        $calmFailures[] = preg_replace('/[^\x20-\x7e]/', '?', substr($f[4], 0, 300));
    }
    if ($f[3] !== '-') {
        $writes[(int) $f[3]] = (int) $f[1];
    }
}
if ($finalRev > 0) {
    $writes[$finalRev] = $finalNs;
}
ksort($writes);

// ---- pass 1 over the answers: what to recompute --------------------------------------------
$files = [];
for ($n = 1; $n <= $nodes; $n++) {
    foreach (glob("$log/records-node$n.*") ?: [] as $file) {
        $files[] = [$n, $file];
    }
}
$need = []; // revision => node => [country|sticky => true]
$records = 0;
foreach ($files as [$n, $file]) {
    $fh = fopen($file, 'r');
    while (($line = fgets($fh)) !== false) {
        $f = explode(' ', rtrim($line, "\n"));
        if (count($f) !== 9 || $f[1] !== '200' || !ctype_digit($f[4])) {
            continue;
        }
        $need[(int) $f[4]][$n][$f[7] . '|' . $f[8]] = true;
    }
    fclose($fh);
}
ksort($need);

// ---- the twin on each revision's state -----------------------------------------------------
// Each node's effective state (its stages in place) at each revision it answered from; a
// node that applies a stage also gets the answer from current values alone, so that the
// answers a staged value decided can be counted.
$expected = []; // "rev|node|country|sticky" => "shard origin"
$current = []; // the same, from current values alone, where a node applied a stage
$nodeStages = []; // "rev|node" => stage ids applied
$twinDir = $tmp . '/chaos-twin-' . getmypid();
@mkdir($twinDir, 0755, true);
$routeAll = function (array $kvs, int $rev, array $cases) use ($twinDir, $check): array {
    [$out, $loaded] = dw_chaos_twin_routes($twinDir, $kvs, $rev, $cases);
    if (!$loaded) {
        $check(false, "twin loads the snapshot built for revision $rev");
    }
    return $out;
};
$state = [];
$i = 0;
$beyondHistory = [];
foreach ($need as $rev => $byNode) {
    while ($i < count($events) && $events[$i][0] <= $rev) {
        [, $key, $value] = $events[$i++];
        if ($value === null) { unset($state[$key]); } else { $state[$key] = $value; }
    }
    // etcd's revision at the end (the final range read's header) bounds them too: the node
    // reports, outside the prefix, raise it, and a node may publish the revision it reached
    if ($rev > $lastRev && $rev > $finalRev && $rev > (int) ($final['header']['revision'] ?? 0)) {
        $beyondHistory[$rev] = true;
    }
    $staged = dw_chaos_has_stages($state);
    [$base] = dw_chaos_effective($state, null);
    // nodes with the same effective state share one twin
    $groups = []; // serialized kvs => [kvs, [node => cases]]
    foreach ($byNode as $n => $cases) {
        [$kvs, $ids] = $staged ? dw_chaos_effective($state, $nodeInfo[$n] ?? null) : [$base, []];
        $ids !== [] && $nodeStages["$rev|$n"] = $ids;
        $g = md5(serialize($kvs));
        $groups[$g][0] = $kvs;
        $groups[$g][1][$n] = $cases;
    }
    foreach ($groups as [$kvs, $nodeCases]) {
        $cases = array_merge(...array_values($nodeCases));
        $routes = $routeAll($kvs, $rev, $cases);
        $routesNow = $kvs === $base ? null : $routeAll($base, $rev, $cases);
        foreach ($nodeCases as $n => $cs) {
            foreach ($cs as $case => $_) {
                $expected["$rev|$n|$case"] = $routes[$case];
                $routesNow !== null && $current["$rev|$n|$case"] = $routesNow[$case];
            }
        }
    }
}
@rmdir($twinDir);

// ---- pass 2: compare, order, availability, staleness ---------------------------------------
$wrong = 0;
$fromStage = 0; // answers of a node that applied a stage at their revision
$stagedValue = 0; // ... that a staged value decided (current values alone answer otherwise)
$wrongShown = [];
$checked = 0;
$failed = 0;
$failedShown = [];
$unavailable = 0;
$revZero = 0;
$backwards = 0;
$backShown = [];
$perNode = [];
$staleAfterFinal = [];
$lastOlderFinal = [];
$answersAfterFinal = [];
$maxClockByRev = []; // node => rev => max clock
$workersSeen = [];
$firstNs = PHP_INT_MAX;
$lastNs = 0;
$lastOfFile = [];
$stalls = []; // [node, from ns, ms]: a connection with no answer for more than 2 s
// Stalls spanning a kill-lsphp of their node, and a non-200 answer that ends one, are
// counted apart (stalls.php says why): [node, from ns, ms].
require_once __DIR__ . '/stalls.php';
$olsStalls = [];
$olsUnavailable = 0;
$spansKillLsphp = fn (int $n, int $from, int $to): bool => dw_chaos_spans_kill_lsphp($faults, $n, $from, $to);
foreach ($files as [$n, $file]) {
    $byWorker = [];
    $fh = fopen($file, 'r');
    $prev = 0;
    while (($line = fgets($fh)) !== false) {
        $line = rtrim($line, "\n");
        $f = explode(' ', $line);
        $records++;
        $endsOlsStall = false;
        if ($prev > 0 && (int) $f[0] - $prev > 2_000_000_000) {
            if ($spansKillLsphp($n, $prev, (int) $f[0])) {
                $olsStalls[] = [$n, $prev, ((int) $f[0] - $prev) / 1e6];
                $endsOlsStall = true;
            } else {
                $stalls[] = [$n, $prev, ((int) $f[0] - $prev) / 1e6];
            }
        }
        $prev = (int) $f[0];
        $perNode[$n] = ($perNode[$n] ?? 0) + 1;
        $at = (int) $f[0];
        $firstNs = min($firstNs, $at);
        $lastNs = max($lastNs, $at);
        if (count($f) !== 9 || $f[1] !== '200' || !ctype_digit($f[2]) || !ctype_digit($f[3]) || !ctype_digit($f[4])) {
            // A request to a node whose PHP pool the nemesis is restarting may fail (nginx
            // answers 502 while no php-fpm listens): counted apart, not as a failure.
            if (count($f) >= 2 && $f[1] !== '200' && $inFault($at, 'restart-pool', (string) $n, 500_000_000)) {
                $unavailable++;
            } elseif (count($f) >= 2 && $f[1] !== '200' && ($endsOlsStall || $inFault($at, 'kill-lsphp', (string) $n, 500_000_000))) {
                $olsUnavailable++;
            } else {
                $failed++;
                if (count($failedShown) < 5) {
                    $failedShown[] = "node $n: $line";
                }
            }
            continue;
        }
        $rev = (int) $f[4];
        $clock = (int) $f[3];
        $rev === 0 && $revZero++;
        $checked++;
        $want = $expected["$rev|$n|{$f[7]}|{$f[8]}"] ?? '?';
        if (isset($nodeStages["$rev|$n"])) {
            $fromStage++;
            if ($want === "{$f[5]} {$f[6]}" && ($current["$rev|$n|{$f[7]}|{$f[8]}"] ?? $want) !== $want) {
                $stagedValue++;
            }
        }
        if ($want !== "{$f[5]} {$f[6]}") {
            $wrong++;
            if (count($wrongShown) < 10) {
                $wrongShown[] = "node $n worker {$f[2]} revision $rev country '{$f[7]}' sticky '{$f[8]}': served '{$f[5]} {$f[6]}', twin says '$want'";
            }
        }
        $byWorker[$f[2]][] = [$clock, $rev];
        $workersSeen[$n][$f[2]] = true;
        $m = &$maxClockByRev[$n][$rev];
        $m = max($m ?? 0, $clock);
        unset($m);
        if ($finalRev > 0 && $clock > $finalNs) {
            if ($rev < $finalRev) {
                $lastOlderFinal[$n] = max($lastOlderFinal[$n] ?? 0, $clock);
            } elseif ($clock > $finalNs + 1_000_000_000) {
                $answersAfterFinal[$n] = ($answersAfterFinal[$n] ?? 0) + 1;
            }
        }
    }
    fclose($fh);
    $lastOfFile[] = [$n, $prev];
    $stepsBack = revision_steps_back($byWorker);
    $backwards += count($stepsBack);
    foreach (array_slice($stepsBack, 0, 5 - count($backShown)) as [$worker, $from, $to]) {
        $backShown[] = "node $n worker $worker went back from revision $from to $to";
    }
}

// One connection per file: its last answer must come shortly before the load ended (the
// latest answer of all, when the run did not say when it stopped the load).
foreach ($lastOfFile as [$n, $prev]) {
    $end = $loadEnd > 0 ? $loadEnd : $lastNs;
    if ($prev > 0 && $end - $prev > 2_000_000_000) {
        if ($spansKillLsphp($n, $prev, $end)) {
            $olsStalls[] = [$n, $prev, ($end - $prev) / 1e6];
        } else {
            $stalls[] = [$n, $prev, ($end - $prev) / 1e6];
        }
    }
}

// Staleness: for each revision the writer saw committed (at ack ns) and each node, how long
// after the ack the node still answered from an older revision (0 when it never did).
$stale = ['fault' => [], 'calm' => []];
$staleByKind = [];
for ($n = 1; $n <= $nodes; $n++) {
    $byRev = $maxClockByRev[$n] ?? [];
    ksort($byRev);
    $revs = array_keys($byRev);
    $prefixMax = [];
    $run = 0;
    foreach ($revs as $r) {
        $run = max($run, $byRev[$r]);
        $prefixMax[] = $run;
    }
    $j = 0;
    $k = -1; // last index with revision < R
    foreach ($writes as $r => $ack) {
        while ($j < count($revs) && $revs[$j] < $r) {
            $j++;
        }
        $k = $j - 1;
        if ($ack < $firstNs || $ack > $lastNs) {
            continue;
        }
        $older = $k >= 0 ? $prefixMax[$k] : 0;
        $s = max(0, $older - $ack) / 1e6;
        $kind = $faultAt($ack);
        $stale[$kind !== null ? 'fault' : 'calm'][] = $s;
        if ($kind !== null) {
            $staleByKind[$kind][] = $s;
        }
    }
}
$pct = function (array $v, float $p): string {
    if ($v === []) {
        return '-';
    }
    sort($v);
    return sprintf('%.0f', $v[min(count($v) - 1, (int) floor($p * (count($v) - 1) + 0.5))]);
};

$check($records > 0 && $checked > 0, sprintf('%d answers recorded from %d nodes (%s)', $records, count($perNode),
    implode(', ', array_map(fn ($n, $c) => "node $n: $c", array_keys($perNode), $perNode))));
// A wrong answer is diagnosed (it still counts): does it equal the twin's answer at the
// revision before its own? Then the worker most likely resolved on the table it had and
// read revision() after its watcher thread had swapped in the next one: front.php makes
// two calls, and the extension reloads between requests on a thread of its own.
$stateAt = function (int $rev) use ($events): array {
    $state = [];
    foreach ($events as [$r, $key, $value]) {
        if ($r > $rev) {
            break;
        }
        if ($value === null) { unset($state[$key]); } else { $state[$key] = $value; }
    }
    return $state;
};
$previousMatches = 0;
foreach ($wrongShown as $k => $w) {
    if (!preg_match("/^node (\\d+) .* revision (\\d+) country '([^']*)' sticky '([^']*)': served '([^']*)'/", $w, $m)) {
        continue;
    }
    [, $n, $rev, $country, $sticky, $served] = $m;
    $rev = (int) $rev;
    $path = "$tmp/chaos-prev-" . getmypid() . ".json";
    file_put_contents($path, json_encode(['format' => 1, 'revision' => $rev - 1, 'prefix' => DW_CHAOS_PREFIX,
        'kvs' => (object) dw_chaos_effective($stateAt($rev - 1), $nodeInfo[(int) $n] ?? null)[0]], JSON_UNESCAPED_SLASHES));
    $twin = new DwRouter\RegionRouter($path, ['apcu' => false]);
    $route = $twin->resolve($country === '~' ? '' : $country, $sticky === '~' ? null : $sticky);
    unlink($path);
    if ($route['shard'] . ' ' . $route['origin'] === $served) {
        $previousMatches++;
        $wrongShown[$k] .= sprintf(" (= the twin's answer at revision %d: route from the table before, revision from the next)", $rev - 1);
    }
}
$check($wrong === 0, "$checked answers recomputed by the twin from the effective state of their node at their revision: $wrong wrong"
    . ($wrong > 0 ? sprintf(' (%d of the first %d equal the answer at the revision before)', $previousMatches, count($wrongShown)) : ''));
foreach ($wrongShown as $w) {
    echo "    $w\n";
}
$check($failed === 0, "failed requests: $failed (not counted: $unavailable non-200 answers of a node during its pool restart, $olsUnavailable during or ending an OpenLiteSpeed stall after kill-lsphp)");
foreach ($failedShown as $w) {
    echo "    $w\n";
}
$stallText = implode('; ', array_map(fn ($x) => sprintf('node %d for %.0f ms%s', $x[0], $x[2],
    $inFault($x[1], 'restart-pool', (string) $x[0], 0) ? ' from its pool restart' : ''), array_slice($stalls, 0, 6)));
$olsStallText = implode('; ', array_map(fn ($x) => sprintf('node %d for %.0f ms', $x[0], $x[2]), array_slice($olsStalls, 0, 6)));
$check($stalls === [], sprintf('no connection waited more than 2 s for an answer (%d did%s; not counted: %d OpenLiteSpeed stalls after kill-lsphp%s)',
    count($stalls), $stalls === [] ? '' : ": $stallText", count($olsStalls), $olsStalls === [] ? '' : ": $olsStallText"));
$check($backwards === 0, sprintf('no worker\'s revision went backwards (%d workers)', array_sum(array_map('count', $workersSeen))));
foreach ($backShown as $w) {
    echo "    $w\n";
}
$check($beyondHistory === [], 'every answer\'s revision is in etcd\'s history (' . count($need) . ' revisions served)');
$check($revZero === 0, "no answer without a snapshot (revision 0): $revZero");
if ($finalRev > 0) {
    for ($n = 1; $n <= $nodes; $n++) {
        $lag = isset($lastOlderFinal[$n]) ? ($lastOlderFinal[$n] - $finalNs) / 1e6 : 0.0;
        $check($lag <= 1000 && ($answersAfterFinal[$n] ?? 0) > 0,
            sprintf('after the nemesis: node %d served final revision %d %.0f ms after commit (<= 1000), %d answers after that second, all at it',
                $n, $finalRev, $lag, $answersAfterFinal[$n] ?? 0));
    }
}
$check(count($writes) >= 2, sprintf('writer: %d dwctl writes, %d committed with a known revision (exit codes: %s)',
    $writeCount, count($writes) - ($finalRev > 0 ? 1 : 0),
    implode(', ', array_map(fn ($k, $v) => "$k: $v", array_keys($writeRc), $writeRc))));

// A write the cluster could take does not fail: outside every fault's window, no dwctl write
// ends with exit 1 (etcd unavailable); each one that did is named with what dwctl said.
$check($calmFailures === [], sprintf('no dwctl write failed with exit 1 outside the faults (%d of %d did%s)',
    count($calmFailures), $writeWhere['calm'][0] ?? 0,
    $calmFailures === [] ? '' : ': ' . implode(' | ', array_slice($calmFailures, 0, 3))));

// Stages: the writer's fixed ones went through (history), and staged values were served.
$stageOps = dw_chaos_stage_ops(@file("$log/writes.log", FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: []);
$stageOpsText = implode(', ', array_map(fn ($what, $rcs) => "$what " . array_sum($rcs) . ' (exit ' .
    implode(', ', array_map(fn ($rc, $c) => "$rc: $c", array_keys($rcs), $rcs)) . ')', array_keys($stageOps), $stageOps)) ?: 'none';
$promoted = dw_chaos_stage_fate($events, 'chaos-p1');
$aborted = dw_chaos_stage_fate($events, 'chaos-a1');
$check($promoted['promoted'] === true && $aborted['promoted'] === false,
    sprintf('stages: chaos-p1 created at revision %s, promoted at %s; chaos-a1 created at %s, aborted at %s (stage ops: %s)',
        $promoted['created'] ?? '-', $promoted['closed'] ?? '-', $aborted['created'] ?? '-', $aborted['closed'] ?? '-', $stageOpsText));
$check($stagedValue > 0, sprintf('stages: %d answers from nodes applying a stage at their revision, %d of them decided by a staged value (current values alone answer otherwise)',
    $fromStage, $stagedValue));

// ---- figures -------------------------------------------------------------------------------
$seconds = max(1, ($lastNs - $firstNs) / 1e9);
$md = [];
$md[] = sprintf('### Chaos run: %s, seed %s', $opts['duration'] ?? '?', $opts['seed'] ?? '?');
$md[] = '';
$md[] = sprintf('3-member etcd (%s), %d nodes (%s), each with its own dw-agent (all three endpoints) and its snapshot on a 512 KiB tmpfs; wrk, 2 connections per node, random CF-IPCountry and X-DW-Sticky; a dwctl writer (drain, restore, region set/delete, policy set, stage create/widen/promote/abort) every 250 ms; one fault at a time on a seeded schedule. Machine: 2 shared cores, everything on it.',
    ($opts['partition'] ?? '0') === '1' ? 'loopback; member 3 in its own network namespace behind a veth pair' : 'loopback',
    $nodes, implode(', ', array_filter($servers)) ?: 'nginx + php-fpm');
$md[] = '';
$md[] = '| figure | value |';
$md[] = '|---|---|';
$md[] = sprintf('| requests recorded | %d (%.0f/s over %.0f s) |', $records, $records / $seconds, $seconds);
$md[] = sprintf('| answers checked against the twin | %d (%d distinct revisions) |', $checked, count($need));
$md[] = sprintf('| wrong answers | %d%s |', $wrong, $wrong > 0 ? sprintf(' (%d of the first %d equal the twin\'s answer at the revision before theirs)', $previousMatches, count($wrongShown)) : '');
$md[] = sprintf('| answers from nodes applying a stage / decided by a staged value | %d / %d |', $fromStage, $stagedValue);
$md[] = sprintf('| stage ops (exit codes) | %s |', $stageOpsText);
$md[] = sprintf('| failed requests | %d |', $failed);
$md[] = sprintf('| non-200 during the node\'s own pool restart (counted apart) | %d |', $unavailable);
$md[] = sprintf('| wrk socket errors (connect, read, write, timeout) | %s |', $opts['socket-errors'] ?? '-');
$md[] = sprintf('| worker revisions going backwards | %d |', $backwards);
$md[] = sprintf('| connections stalled > 2 s | %d%s |', count($stalls), $stalls === [] ? '' : " ($stallText)");
$md[] = sprintf('| OpenLiteSpeed stalls after kill-lsphp (counted apart): connections / non-200 answers | %d%s / %d |',
    count($olsStalls), $olsStalls === [] ? '' : " ($olsStallText)", $olsUnavailable);
$md[] = sprintf('| dwctl writes (committed with revision) | %d (%d) |', $writeCount, count($writes) - ($finalRev > 0 ? 1 : 0));
$md[] = sprintf('| dwctl writes failing with exit 1 (etcd unavailable): while a member was killed or cut off / other faults / no fault | %d of %d / %d of %d / %d of %d |',
    $writeWhere['down'][1] ?? 0, $writeWhere['down'][0] ?? 0, $writeWhere['other'][1] ?? 0, $writeWhere['other'][0] ?? 0,
    $writeWhere['calm'][1] ?? 0, $writeWhere['calm'][0] ?? 0);
$md[] = sprintf('| faults injected | %d: %s |', count($faults),
    implode(', ', array_map(fn ($k, $v) => "$k $v", array_keys($faultKinds), $faultKinds)) ?: 'none');
$md[] = sprintf('| staleness during faults, ms (p50 / p99 / max, n) | %s / %s / %s (%d) |',
    $pct($stale['fault'], 0.5), $pct($stale['fault'], 0.99), $pct($stale['fault'], 1.0), count($stale['fault']));
$md[] = sprintf('| staleness outside faults, ms (p50 / p99 / max, n) | %s / %s / %s (%d) |',
    $pct($stale['calm'], 0.5), $pct($stale['calm'], 0.99), $pct($stale['calm'], 1.0), count($stale['calm']));
$md[] = '';
if ($staleByKind !== []) {
    ksort($staleByKind);
    $md[] = '| commits during | revision x node pairs | staleness p50 / p99 / max, ms |';
    $md[] = '|---|---|---|';
    foreach ($staleByKind as $kind => $v) {
        $md[] = sprintf('| %s | %d | %s / %s / %s |', $kind, count($v), $pct($v, 0.5), $pct($v, 0.99), $pct($v, 1.0));
    }
    $md[] = '';
}
$md[] = 'Staleness: for each revision dwctl reported committed and each node, the time from dwctl returning to that node\'s last answer from an older revision (0 if none); "during faults" when the commit fell inside a fault or the second after it heals. A failed request is any non-200 answer, or one missing a worker, clock or revision, except a node\'s answers while the nemesis restarts that node\'s PHP pool (until 0.5 s after it is back), reported apart; likewise a stall > 2 s of a LiteSpeed node\'s connection that spans a kill-lsphp of that node (OpenLiteSpeed waits up to its 60 s initTimeout on a connection queued to the dead pool\'s listener, docs/deploy-litespeed.md) and a non-200 answer that ends it or comes during that fault. wrk socket errors are reported by the run script.';
$text = implode("\n", $md) . "\n";
echo "\n", $text;
if (isset($opts['markdown'])) {
    file_put_contents((string) $opts['markdown'], $text);
}
$bad = count(array_filter($checks, fn ($c) => !$c[0]));
exit($bad === 0 ? 0 : 1);
