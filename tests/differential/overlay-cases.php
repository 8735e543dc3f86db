<?php

declare(strict_types=1);

/*
 * Writes crates/routing/tests/overlay-cases.json, the overlay rule's cases that
 * dw_routing::stage::overlay (crates/routing/tests/it/overlay_cases.rs) and php/Stages.php
 * (tests/differential/twin-selftest.php) are both held to. Every expectation below is
 * written by hand from docs/routing.md ("Stages"), not computed by either implementation.
 *
 *   scripts/devenv exec -- php tests/differential/overlay-cases.php > crates/routing/tests/overlay-cases.json
 */
$P = '/dw/routing/';
$cur = [$P.'region/DE' => 'de-cur', $P.'region/FR' => 'fr-cur', $P.'policy/global' => 'pol-cur', $P.'origin/fra-a' => 'o'];
$rec = function (string $id, array $cohort, array $kvs, array $extra = []) {
    return json_encode(['schema' => 1, 'id' => $id, 'cohort' => (object) $cohort, 'kvs' => (object) $kvs] + $extra, JSON_UNESCAPED_SLASHES);
};
$n1 = ['id' => 'edge-1', 'labels' => (object) []];
$n2 = ['id' => 'edge-2', 'labels' => (object) []];
$cases = [];
$add = function (string $name, array $stageKvs, $node, array $wantKvs, array $wantStages, array $wantProblems, array $revs = [], ?array $base = null, string $prefix = '/dw/routing/') use (&$cases, $cur) {
    $kvs = ($base ?? $cur) + $stageKvs;
    ksort($kvs, SORT_STRING); ksort($wantKvs, SORT_STRING); sort($wantProblems, SORT_STRING);
    $cases[] = ['name' => $name, 'prefix' => $prefix, 'kvs' => (object) $kvs, 'revisions' => (object) $revs, 'node' => $node,
        'want' => ['kvs' => (object) $wantKvs, 'stages' => $wantStages, 'problems' => $wantProblems]];
};
$A = $rec('a', ['nodes' => ['edge-1']], ['region/DE' => 'de-a', 'region/AT' => 'at-a', 'policy/global' => null]);
$cohortA = [$P.'region/DE' => 'de-a', $P.'region/AT' => 'at-a', $P.'region/FR' => 'fr-cur', $P.'origin/fra-a' => 'o'];
$add('no stage: the keys as they are', [], $n1, $cur, [], []);
$add('a named node serves the stage: values replaced, a key added, null removes, stage key dropped', [$P.'stage/a' => $A], $n1, $cohortA, [['id' => 'a', 'revision' => 41]], [], [$P.'stage/a' => 41]);
$add('a node outside the cohort: current values, stage key dropped', [$P.'stage/a' => $A], $n2, $cur, [], [], [$P.'stage/a' => 41]);
$add('a node without an id is in no cohort', [$P.'stage/a' => $A], null, $cur, [], [], [$P.'stage/a' => 41]);
$add('no revision known for the stage key: 0', [$P.'stage/a' => $A], $n1, $cohortA, [['id' => 'a', 'revision' => 0]], []);
$L = $rec('l', ['labels' => ['site' => 'fra', 'tier' => 'edge']], ['region/DE' => 'de-l']);
$add('labels: a node with every label is in', [$P.'stage/l' => $L], ['id' => 'x', 'labels' => (object) ['site' => 'fra', 'tier' => 'edge', 'rack' => '7']],
    [$P.'region/DE' => 'de-l'] + $cur, [['id' => 'l', 'revision' => 7]], [], [$P.'stage/l' => 7]);
$add('labels: a node with only some of them is out', [$P.'stage/l' => $L], ['id' => 'x', 'labels' => (object) ['site' => 'fra']], $cur, [], [], [$P.'stage/l' => 7]);
// DwCohort::point("p", "edge-1") = 988 (pinned by the cohort fixtures)
$add('points: edge-1 (point 988) is in at 989', [$P.'stage/p' => $rec('p', ['points' => 989], ['region/FR' => 'fr-p'])], $n1,
    [$P.'region/FR' => 'fr-p'] + $cur, [['id' => 'p', 'revision' => 9]], [], [$P.'stage/p' => 9]);
$add('points: edge-1 (point 988) is out at 988', [$P.'stage/p' => $rec('p', ['points' => 988], ['region/FR' => 'fr-p'])], $n1, $cur, [], [], [$P.'stage/p' => 9]);
$add('points 10000: every node is in', [$P.'stage/p' => $rec('p', ['points' => 10000], ['region/FR' => 'fr-p'])], $n2,
    [$P.'region/FR' => 'fr-p'] + $cur, [['id' => 'p', 'revision' => 9]], [], [$P.'stage/p' => 9]);
$add('points 10001: unreadable, applies nowhere', [$P.'stage/p' => $rec('p', ['points' => 10001], ['region/FR' => 'fr-p'])], $n2, $cur, [], [$P.'stage/p'], [$P.'stage/p' => 9]);
$add('points -1: unreadable', [$P.'stage/p' => '{"schema":1,"id":"p","cohort":{"points":-1},"kvs":{"region/FR":"fr-p"}}'], $n1, $cur, [], [$P.'stage/p']);
$add('points 989.0: unreadable (not an integer)', [$P.'stage/p' => '{"schema":1,"id":"p","cohort":{"points":989.0},"kvs":{"region/FR":"fr-p"}}'], $n1, $cur, [], [$P.'stage/p']);
$add('an empty cohort: readable, serves no node', [$P.'stage/e' => $rec('e', [], ['region/FR' => 'fr-e'])], $n1, $cur, [], []);
$add('the cohort is a union: named although its point is out', [$P.'stage/p' => $rec('p', ['points' => 1, 'nodes' => ['edge-1', 'edge-1'], 'labels' => ['site' => 'ams']], ['region/FR' => 'fr-p'])], $n1,
    [$P.'region/FR' => 'fr-p'] + $cur, [['id' => 'p', 'revision' => 0]], []);
$B = $rec('b', ['nodes' => ['edge-1']], ['region/DE' => 'de-b']);
$C = $rec('c', ['nodes' => ['edge-2']], ['region/DE' => 'de-c', 'region/FR' => 'fr-c']);
$add('two stages touch region/DE: it routes from current everywhere, the rest applies', [$P.'stage/b' => $B, $P.'stage/c' => $C], $n2,
    [$P.'region/FR' => 'fr-c'] + $cur, [['id' => 'c', 'revision' => 12]], [$P.'region/DE'], [$P.'stage/b' => 11, $P.'stage/c' => 12]);
$add('two stages touch region/DE: a stage left with nothing else still counts as applied', [$P.'stage/b' => $B, $P.'stage/c' => $C], $n1,
    $cur, [['id' => 'b', 'revision' => 11]], [$P.'region/DE'], [$P.'stage/b' => 11, $P.'stage/c' => 12]);
$add('an unreadable stage does not contest a key', [$P.'stage/b' => $B, $P.'stage/c' => '{"schema":2,"id":"c","cohort":{},"kvs":{"region/DE":"x"}}'], $n1,
    [$P.'region/DE' => 'de-b'] + $cur, [['id' => 'b', 'revision' => 0]], [$P.'stage/c']);
$both = $rec('b', ['nodes' => ['edge-1']], ['region/FR' => 'fr-b']);
$add('stages apply in key order; both named', [$P.'stage/b' => $both, $P.'stage/a' => $rec('a', ['nodes' => ['edge-1']], ['region/DE' => 'de-a'])], $n1,
    [$P.'region/DE' => 'de-a', $P.'region/FR' => 'fr-b'] + $cur, [['id' => 'a', 'revision' => 3], ['id' => 'b', 'revision' => 4]], [], [$P.'stage/a' => 3, $P.'stage/b' => 4]);
$bad = [
    'not JSON' => '{"schema":1,',
    'the positional form with 9 fields' => '[1,"a",{"nodes":["edge-1"]},{"region/DE":"x"},{},"","","",1]',
    'the positional form with 3 fields' => '[1,"a",{"nodes":["edge-1"]}]',
    'the positional form with a null cohort' => '[1,"a",null,{"region/DE":"x"}]',
    'a positional cohort with 4 fields' => '[1,"a",[0,["edge-1"],{},1],{"region/DE":"x"}]',
    'kvs as a list' => '[1,"a",{"nodes":["edge-1"]},["x"]]',
    'schema 2' => '{"schema":2,"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":"x"}}',
    'schema 1.0' => '{"schema":1.0,"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":"x"}}',
    'schema missing' => '{"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":"x"}}',
    'cohort missing' => '{"schema":1,"id":"a","kvs":{"region/DE":"x"}}',
    'kvs missing' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1"]}}',
    'the record names another id' => '{"schema":1,"id":"b","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":"x"}}',
    'an unknown cohort field' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1"],"percent":5},"kvs":{"region/DE":"x"}}',
    'cohort nodes null' => '{"schema":1,"id":"a","cohort":{"nodes":null},"kvs":{"region/DE":"x"}}',
    'a cohort node not a string' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1",2]},"kvs":{"region/DE":"x"}}',
    'a label value not a string' => '{"schema":1,"id":"a","cohort":{"labels":{"site":1}},"kvs":{"region/DE":"x"}}',
    'no staged key' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{}}',
    'an origin key staged' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":"x","origin/fra-a":"y"}}',
    'region/ without a geo' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{"region/":"x"}}',
    'policy/other' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{"policy/other":"x"}}',
    'a staged value that is a number' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":5}}',
    'a staged value that is an object' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":{"shard":"x"}}}',
    'created_by null' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":"x"},"created_by":null}',
    'a base revision as a string' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":"x"},"base":{"region/DE":"5"}}',
    'base null' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":"x"},"base":null}',
];
foreach ($bad as $why => $value) {
    $add("unreadable ($why): applies nowhere, named", [$P.'stage/a' => $value], $n1, $cur, [], [$P.'stage/a']);
}
$add('an id with a capital letter (key and record agree): unreadable', [$P.'stage/A' => '{"schema":1,"id":"A","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":"x"}}'], $n1, $cur, [], [$P.'stage/A']);
$long = str_repeat('a', 64);
$add('a 64-byte id: unreadable', [$P."stage/$long" => $rec($long, ['nodes' => ['edge-1']], ['region/DE' => 'x'])], $n1, $cur, [], [$P."stage/$long"]);
$ok63 = str_repeat('a', 63);
$add('a 63-byte id: applies', [$P."stage/$ok63" => $rec($ok63, ['nodes' => ['edge-1']], ['region/DE' => 'x'])], $n1,
    [$P.'region/DE' => 'x'] + $cur, [['id' => $ok63, 'revision' => 0]], []);
$add('an empty id (key stage/): unreadable, dropped', [$P.'stage/' => '{"schema":1,"id":"","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":"x"}}'], $n1, $cur, [], [$P.'stage/']);
$add('a key stage/a/b: unreadable, dropped', [$P.'stage/a/b' => '{"schema":1,"id":"a/b","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":"x"}}'], $n1, $cur, [], [$P.'stage/a/b']);
$add('stagex and stage (no slash) are routing keys, kept', [$P.'stagex' => 'v1', $P.'stage' => 'v2'], $n1, $cur + [$P.'stagex' => 'v1', $P.'stage' => 'v2'], [], []);
$add('unknown top-level fields are ignored; base, created_* and reason read', [$P.'stage/a' => '{"schema":1,"id":"a","cohort":{"nodes":["edge-1"]},"kvs":{"region/DE":"x"},"base":{"region/DE":-1},"created_by":"u@h","created_at":"t","reason":"r","extra":[1,{"y":null}]}'], $n1,
    [$P.'region/DE' => 'x'] + $cur, [['id' => 'a', 'revision' => 0]], []);
// serde also reads a struct from a JSON array of its fields in order (default fields may be left off)
$add('the positional form (serde reads a struct from an array): applies', [$P.'stage/a' => '[1,"a",{"nodes":["edge-1"]},{"region/DE":"x"}]'], $n1,
    [$P.'region/DE' => 'x'] + $cur, [['id' => 'a', 'revision' => 0]], []);
$add('the positional form with all 8 fields, a positional cohort', [$P.'stage/a' => '[1,"a",[0,["edge-2","edge-1"]],{"region/DE":"x"},{"region/DE":3},"u","t","r"]'], $n1,
    [$P.'region/DE' => 'x'] + $cur, [['id' => 'a', 'revision' => 0]], []);
$add('a positional empty cohort: readable, serves no node', [$P.'stage/a' => '{"schema":1,"id":"a","cohort":[],"kvs":{"region/DE":"x"}}'], $n1, $cur, [], []);
$add('a positional cohort by labels', [$P.'stage/a' => '{"schema":1,"id":"a","cohort":[0,[],{"site":"fra"}],"kvs":{"region/DE":"x"}}'], ['id' => 'q', 'labels' => (object) ['site' => 'fra']],
    [$P.'region/DE' => 'x'] + $cur, [['id' => 'a', 'revision' => 0]], []);
$add('null for a key that is absent: nothing to remove', [$P.'stage/a' => $rec('a', ['nodes' => ['edge-1']], ['region/JP' => null])], $n1, $cur, [['id' => 'a', 'revision' => 0]], []);
$add('staged values are copied as they are, even an invalid region value', [$P.'stage/a' => $rec('a', ['nodes' => ['edge-1']], ['region/DE' => '{not json'])], $n1,
    [$P.'region/DE' => '{not json'] + $cur, [['id' => 'a', 'revision' => 0]], []);
$add('another prefix: its own stage/ keys', ['/p/stage/a' => $rec('a', ['nodes' => ['edge-1']], ['region/DE' => 'x']), $P.'stage/b' => 'kept: not under /p/'], $n1,
    ['/p/region/DE' => 'x', '/p/region/FR' => 'f', $P.'stage/b' => 'kept: not under /p/'], [['id' => 'a', 'revision' => 0]], [], [], ['/p/region/FR' => 'f'], '/p/');
echo json_encode(['note' => 'Overlay rule cases (docs/routing.md, "Stages"), checked against dw_routing::stage::overlay by crates/routing/tests/it/overlay_cases.rs and against php/Stages.php by tests/differential/twin-selftest.php. Written by tests/differential/overlay-cases.php. Stage values are raw strings. want.problems: the keys named in Overlay::problems.', 'cases' => $cases], JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR), "\n";
