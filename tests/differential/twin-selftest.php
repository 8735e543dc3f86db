<?php

declare(strict_types=1);

/*
 * Known-answer test of the userland twin (php/RegionRouter.php), so the oracle of the
 * differential test is itself checked against docs/routing.md, not only against the
 * extension.
 *
 *   scripts/devenv exec -- php -d apc.enable_cli=1 tests/differential/twin-selftest.php
 *
 * Every expected answer below was derived by hand from the rules. For the legacy pick the
 * crc32 values were computed independently (Python's zlib.crc32) and walked by hand; for
 * the rendezvous pick the xxh3 digests are listed and the scores w / -ln(u) were
 * computed independently (Python's math.log). Ends with `twin-selftest: N passed, M
 * failed` and exits 1 on any failure.
 */

require_once __DIR__ . '/../../php/RegionRouter.php';
require_once __DIR__ . '/../lib/script-setup.php';

use DwRouter\RegionRouter;

// Any diagnostic the twin lets through is a failure.
throw_on_diagnostics();

$tempDir = private_temp_dir('twin-selftest');

/** Writes a snapshot (kvs given as geo/policy values under the default prefix) to a fresh path. */
function snapshotFile(array|string $document): string
{
    global $tempDir;
    static $n = 0;
    $path = sprintf('%s/snapshot-%03d.json', $tempDir, ++$n);
    $json = is_string($document) ? $document : json_encode($document, JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR);
    file_put_contents($path, $json);

    return $path;
}

/** @param array<string, string> $kvs */
function snapshot(array $kvs, int $revision = 7, ?string $prefix = null): array
{
    $document = ['format' => 1, 'revision' => $revision, 'kvs' => $kvs];
    if ($prefix !== null) {
        $document['prefix'] = $prefix;
    }

    return $document;
}

function router(string $path, array $options = []): RegionRouter
{
    return new RegionRouter($path, ['apcu' => false] + $options);
}

function route(string $shard, string $origin): array
{
    return ['shard' => $shard, 'origin' => $origin];
}

const P = '/dw/routing/';
const DE_REGION = '{"shard":"eu-1","origins":["fra-a","fra-b","ams-a"],"weight":{"fra-a":50,"fra-b":30,"ams-a":20},"updated":"2026-11-30T08:00:00Z"}';
const US_REGION = '{"shard":"us-1","origins":["iad-a","sjc-a"],"weight":{"iad-a":60,"sjc-a":40}}';
const GB_REGION = '{"shard":"eu-2","origins":["lon-a"],"weight":{"lon-a":1}}';

$cases = [];

// 1. Legacy pick, no sticky key: crc32("DEfra-afra-bams-a") = 3362753505, % 100 = 5;
//    5 - 50 < 0 -> fra-a. With sticky keys: crc32("visitor-1fra-afra-bams-a") = 1579417173,
//    % 100 = 73: 73-50 = 23, 23-30 < 0 -> fra-b; crc32("visitor-4...") = 611984195, % 100 = 95:
//    45, 15, 15-20 < 0 -> ams-a.
$cases['legacy pick walks crc32 % sum over the weights'] = static function (): array {
    $r = router(snapshotFile(snapshot([P . 'region/DE' => DE_REGION])));

    return [
        [$r->resolve('DE'), route('eu-1', 'fra-a')],
        [$r->resolve('DE', 'visitor-1'), route('eu-1', 'fra-b')],
        [$r->resolve('DE', 'visitor-4'), route('eu-1', 'ams-a')],
    ];
};

// 2. Unlisted weights count in the sum: origins [a, b], weight {a:0, b:1, zzz:98}, sum 99.
//    crc32("k1ab") = 932215339, % 99 = 55: 55-0, 55-1 = 54 never < 0 -> falls through to
//    origins[0] = "a", although a has weight 0 (the original router's behaviour).
//    crc32("v109ab") = 4097024613, % 99 = 0: 0-0 = 0 not < 0, 0-1 < 0 -> "b".
$cases['legacy pick sums unlisted weights and falls through to origins[0]'] = static function (): array {
    $r = router(snapshotFile(snapshot([
        P . 'region/XX' => '{"shard":"s","origins":["a","b"],"weight":{"a":0,"b":1,"zzz":98}}',
    ])));

    return [
        [$r->resolve('XX', 'k1'), route('s', 'a')],
        [$r->resolve('XX', 'v109'), route('s', 'b')],
    ];
};

// 3. Rendezvous: digests xxh3(key . "\0" . origin), h = first 13 hex digits.
//    key "DE": fra-a 040c3382e228a, fra-b 22c0a47fcdef6, ams-a 88fc050ed454e;
//      scores 50/-ln u = 12.057, 30/.. = 15.023, 20/.. = 31.984 -> ams-a.
//    key "visitor-1": fra-a 5ae736b9b6d90, fra-b d38d678f13885, ams-a 7147ccbae9963;
//      scores 48.291, 157.311, 24.531 -> fra-b; with fra-b at weight 0 (skipped) -> fra-a.
$cases['rendezvous pick takes the greatest w / -ln(u)'] = static function (): array {
    $policy = '{"pick":"rendezvous"}';
    $r = router(snapshotFile(snapshot([P . 'policy/global' => $policy, P . 'region/DE' => DE_REGION])));
    $drained = router(snapshotFile(snapshot([
        P . 'policy/global' => $policy,
        P . 'region/DE' => '{"shard":"eu-1","origins":["fra-a","fra-b","ams-a"],"weight":{"fra-a":50,"fra-b":0,"ams-a":20}}',
    ])));

    return [
        [$r->resolve('DE'), route('eu-1', 'ams-a')],
        [$r->resolve('DE', 'visitor-1'), route('eu-1', 'fra-b')],
        [$drained->resolve('DE', 'visitor-1'), route('eu-1', 'fra-a')],
    ];
};

// 4. An unknown pick mode (or a non-string one) keeps the legacy pick: same answers as case 1.
$cases['unknown pick modes keep the legacy pick'] = static function (): array {
    $checks = [];
    foreach (['{"pick":"Rendezvous"}', '{"pick":["rendezvous"]}', '{"pick":"legacy"}'] as $policy) {
        $r = router(snapshotFile(snapshot([P . 'policy/global' => $policy, P . 'region/DE' => DE_REGION])));
        $checks[] = [$r->resolve('DE', 'visitor-1'), route('eu-1', 'fra-b')];
    }

    return $checks;
};

// 5. Chain: country, then policy.default ("US" when absent), then failover in order.
//    The US answer for key "FR" is not asserted by value elsewhere, so the origin is
//    checked against the listed ones: the shard is what proves the chain.
$cases['resolve chain: country, default, failover'] = static function (): array {
    $withDefault = router(snapshotFile(snapshot([P . 'region/US' => US_REGION, P . 'region/DE' => DE_REGION])));
    $failover = router(snapshotFile(snapshot([
        P . 'policy/global' => '{"default":"ZZ","failover":[3,"YY",null,"GB","US"]}',
        P . 'region/US' => US_REGION,
        P . 'region/GB' => GB_REGION,
    ])));

    return [
        [$withDefault->resolve('DE')['shard'], 'eu-1'],
        [$withDefault->resolve('FR')['shard'], 'us-1'],
        [$failover->resolve('FR'), route('eu-2', 'lon-a')],
        [$failover->resolve('US')['shard'], 'us-1'],
    ];
};

// 6. Region validation: each of these DE values is invalid, so DE falls to GB (the default).
$cases['invalid regions are skipped by the chain'] = static function (): array {
    $invalid = [
        '{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":50.0}}',     // float
        '{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":1e2}}',      // float
        '{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":"50"}}',     // string
        '{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":-1}}',       // negative
        '{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":true}}',     // bool
        '{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":1000001}}',  // too big
        '{"shard":"eu-1","origins":["fra-a"],"weight":[]}',                 // array, not object
        '{"shard":"eu-1","origins":["fra-a"],"weight":[5]}',                // list
        '{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":0,"x":9}}',  // no listed positive
        '{"shard":"eu-1","origins":["fra-a","fra-a"],"weight":{"fra-a":1}}', // duplicate
        '{"shard":"eu-1","origins":{"0":"fra-a"},"weight":{"fra-a":1}}',    // origins not a list
        '{"shard":"eu-1","origins":[],"weight":{"fra-a":1}}',               // empty origins
        '{"shard":"eu-1","origins":[""],"weight":{"":1}}',                  // empty origin
        '{"shard":"","origins":["fra-a"],"weight":{"fra-a":1}}',            // empty shard
        '{"shard":1,"origins":["fra-a"],"weight":{"fra-a":1}}',             // shard not a string
        '{"origins":["fra-a"],"weight":{"fra-a":1}}',                       // no shard
        '{"shard":"eu-1","origins":["fra-a"]}',                             // no weight
        '["eu-1"]', 'null', '"eu-1"', '{', '',                               // not an object
    ];
    $checks = [];
    foreach ($invalid as $value) {
        $r = router(snapshotFile(snapshot([
            P . 'policy/global' => '{"default":"GB"}',
            P . 'region/GB' => GB_REGION,
            P . 'region/DE' => $value,
        ])));
        $checks[] = [[$value, $r->resolve('DE')], [$value, route('eu-2', 'lon-a')]];
        $checks[] = [[$value, $r->stats()['invalid_keys'], $r->stats()['regions']], [$value, 1, 1]];
    }

    return $checks;
};

// 7. Valid corner cases: weight 1000000, "-0" (an integer 0 to PHP), "{}"-keyed numeric
//    origins, a NUL-led origin, duplicate JSON keys (the last wins), unknown fields.
//    Single positive origin in each, so the pick is forced whatever the hash.
$cases['valid corner-case regions'] = static function (): array {
    $r = router(snapshotFile(snapshot([
        P . 'region/A' => '{"shard":"a","origins":["x","y"],"weight":{"x":0,"y":1000000}}',
        P . 'region/B' => '{"shard":"b","origins":["x","y"],"weight":{"x":-0,"y":5}}',
        P . 'region/C' => '{"shard":"c","origins":["0","1"],"weight":{"0":0,"1":3}}',
        P . 'region/D' => '{"shard":"d","origins":["\u0000n","m"],"weight":{"\u0000n":4,"m":0}}',
        P . 'region/E' => '{"shard":"x","shard":"e","origins":["p"],"weight":{"p":0},"weight":{"p":2},"extra":{"deep":[1,{}]}}',
        P . 'region/F' => "{\"shard\":\"f\",\"origins\":[\"\\u0066\"],\"weight\":{\"f\":1}}",
    ])));

    return [
        [$r->resolve('A'), route('a', 'y')],
        [$r->resolve('B'), route('b', 'y')],
        [$r->resolve('C'), route('c', '1')],
        [$r->resolve('D'), route('d', "\0n")],
        [$r->resolve('E'), route('e', 'p')],
        [$r->resolve('F'), route('f', 'f')],
        [$r->stats()['invalid_keys'], 0],
    ];
};

// 8. Nothing valid: the fail-open route, defaults and constructor options.
$cases['fail-open route and options'] = static function (): array {
    $path = snapshotFile(snapshot([P . 'region/DE' => '{"shard":"eu-1"}']));

    return [
        [router($path)->resolve('DE'), route('us-1', 'iad-a')],
        [router($path, ['fallback_shard' => 'fs', 'fallback_origin' => 'fo'])->resolve('DE'), route('fs', 'fo')],
        [router($path)->revision(), 7],
    ];
};

// 9. A missing file answers fail-open, revision 0, empty policy.
$cases['missing snapshot fails open'] = static function (): array {
    global $tempDir;
    $r = router($tempDir . '/does-not-exist.json');

    return [
        [$r->resolve('DE'), route('us-1', 'iad-a')],
        [$r->revision(), 0],
        [$r->policy(), []],
    ];
};

// 10. Files unreadable as a whole: no table, a failed load each.
$cases['file-level validation'] = static function (): array {
    $bad = [
        '',
        'not json',
        '[]',
        '{"format":2,"revision":1,"kvs":{}}',
        '{"format":1.0,"revision":1,"kvs":{}}',
        '{"format":1,"revision":-1,"kvs":{}}',
        '{"format":1,"revision":1.5,"kvs":{}}',
        '{"format":1,"revision":"1","kvs":{}}',
        '{"format":1,"revision":1,"kvs":[]}',
        '{"format":1,"revision":1,"kvs":{"k":{}}}',
        '{"format":1,"revision":1,"kvs":{"k":1}}',
        '{"format":1,"kvs":{}}',
        '{"revision":1,"kvs":{}}',
        '{"format":1,"revision":1}',
        '{"format":1,"revision":1,"prefix":5,"kvs":{}}',
        '{"format":1,"revision":1,"kvs":{}',
    ];
    $checks = [];
    foreach ($bad as $document) {
        $r = router(snapshotFile($document));
        $checks[] = [
            [$document, $r->revision(), $r->resolve('US'), $r->stats()['failed_loads'], $r->stats()['loads']],
            [$document, 0, route('us-1', 'iad-a'), 1, 0],
        ];
    }
    // Accepted: empty kvs, prefix null (the default), unknown fields, NUL-led and numeric keys.
    $good = router(snapshotFile('{"format":1,"revision":0,"prefix":null,"kvs":{"\u0000x":"1","0":"2","'
        . P . 'region/US":' . json_encode(US_REGION) . '},"written_by":"dw-agent"}'));
    $checks[] = [[$good->revision(), $good->resolve('US')['shard'], $good->stats()['keys']], [0, 'us-1', 3]];

    return $checks;
};

// 11. The prefix comes from the snapshot; keys under another prefix do not route.
$cases['snapshot prefix'] = static function (): array {
    $r = router(snapshotFile(snapshot([
        '/other/region/DE' => DE_REGION,
        P . 'region/DE' => GB_REGION,
        '/other/policy/global' => '{"default":"DE"}',
    ], 9, '/other/')));

    return [
        [$r->resolve('DE', 'visitor-1'), route('eu-1', 'fra-b')],
        [$r->resolve('XX', 'visitor-1'), route('eu-1', 'fra-b')],
        [$r->policy(), ['default' => 'DE']],
    ];
};

// 12. policy(): the whole object, unknown fields included; [] when not an object.
$cases['policy object and invalid policy'] = static function (): array {
    $policy = '{"default":"GB","failover":{"0":"US"},"honor_client_hints":false,"pick":"legacy","x":{"y":[1,2.5,null]},"\u0000k":{}}';
    $r = router(snapshotFile(snapshot([P . 'policy/global' => $policy, P . 'region/US' => US_REGION])));
    $invalid = router(snapshotFile(snapshot([P . 'policy/global' => '["GB"]', P . 'region/US' => US_REGION])));

    return [
        [$r->policy(), ['default' => 'GB', 'failover' => ['US'], 'honor_client_hints' => false, 'pick' => 'legacy', 'x' => ['y' => [1, 2.5, null]], "\0k" => []]],
        // failover is an object, not an array: ignored, so GB (absent) then nothing.
        [$r->resolve('ZZ'), route('us-1', 'iad-a')],
        [$r->stats()['invalid_keys'], 0],
        [$invalid->policy(), []],
        [$invalid->stats()['invalid_keys'], 1],
        [$invalid->resolve('ZZ')['shard'], 'us-1'],
    ];
};

// 13. Any byte string is a country: no warning, no exception, the chain applies.
$cases['arbitrary byte countries'] = static function (): array {
    $r = router(snapshotFile(snapshot([P . 'policy/global' => '{"default":"GB"}', P . 'region/GB' => GB_REGION])));
    $checks = [];
    foreach (['', "\0", "G\0B", "\xff\xfe", str_repeat("\x80", 10240), 'gb', 'GB ', '0', '1.0'] as $country) {
        $checks[] = [$r->resolve($country, $country === '' ? null : "\xc3"), route('eu-2', 'lon-a')];
    }

    return $checks;
};

// 14. Last known good: a corrupt snapshot renamed over a good one keeps the good table.
$cases['last known good table survives a corrupt snapshot'] = static function (): array {
    global $tempDir;
    $path = $tempDir . '/lkg.json';
    file_put_contents($path, json_encode(snapshot([P . 'region/GB' => GB_REGION], 41)));
    $first = router($path);
    $corrupt = $tempDir . '/lkg.json.tmp';
    file_put_contents($corrupt, '{"format":1,"revision":42,"kvs":{"' . P . 'region/GB":');
    rename($corrupt, $path);
    $second = router($path);
    file_put_contents($corrupt, json_encode(snapshot([P . 'region/GB' => US_REGION], 43)));
    rename($corrupt, $path);
    $third = router($path);

    return [
        [$first->revision(), 41],
        [$second->revision(), 41],
        [$second->resolve('GB'), route('eu-2', 'lon-a')],
        [$second->stats()['failed_loads'], 1],
        [$third->revision(), 43],
        [$third->resolve('GB')['shard'], 'us-1'],
        [$third->stats()['loads'], 2],
    ];
};

// 14b. A file whose routing_digest is the table's own (only origins changed) keeps the
// table at the new revision; another digest is parsed (docs/snapshot-format.md).
$cases['a routing_digest of the table in use keeps the table'] = static function (): array {
    global $tempDir;
    $path = $tempDir . '/digest.json';
    $publish = static function (int $revision, string $digest, string $gb, string $origin) use ($path): void {
        $document = ['format' => 1, 'revision' => $revision, 'prefix' => P, 'routing_digest' => $digest,
            'kvs' => [P . 'origin/lon-a' => $origin, P . 'region/GB' => $gb]];
        file_put_contents("$path.tmp", json_encode($document, JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR));
        rename("$path.tmp", $path);
    };
    $publish(51, 'd:1', GB_REGION, '{"addr":"a"}');
    $first = router($path);
    $firstStats = [$first->revision(), $first->stats()['reloads_reused']];
    $publish(52, 'd:1', GB_REGION, '{"addr":"b"}');
    $reused = router($path);
    $reusedStats = $reused->stats();
    $publish(53, 'd:2', US_REGION, '{"addr":"b"}');
    $parsed = router($path);

    return [
        [$firstStats, [51, 0]],
        [[$reused->revision(), $reusedStats['revision'], $reusedStats['reloads_reused'], $reusedStats['loads']], [52, 52, 1, 2]],
        [$reused->resolve('GB'), route('eu-2', 'lon-a')],
        [[$parsed->revision(), $parsed->stats()['reloads_reused'], $parsed->resolve('GB')['shard']], [53, 1, 'us-1']],
    ];
};

// 15. The example snapshot: DE by country alone, SI by Europe's bucket, GB with a sticky
//     key, an unknown country (no continent) via the default US. crc32("DEfra-afra-bams-a") % 100 = 5 -> fra-a (as case 1);
//     crc32("visitor-1lon-aams-a") = 3521746662, % 100 = 62, 62-70 < 0 -> lon-a;
//     crc32("ZZiad-asjc-a") = 3538326077, % 100 = 77: 77-60 = 17, 17-40 < 0 -> sjc-a.
$cases['examples/snapshot.json'] = static function (): array {
    $r = router(__DIR__ . '/../../examples/snapshot.json');
    $s = $r->stats();

    return [
        [[$r->revision(), $s['regions'], $s['invalid_keys']], [1234, 39, 0]],
        [$r->resolve('DE'), route('eu-1', 'fra-a')],
        // Slovenia has no key: Europe's bucket (crc32("SIfra-aams-a") picks within it).
        [$r->resolve('SI')['shard'], 'eu-1'],
        [$r->explain('SI')['answered_by'], '/dw/routing/region/continent/EU'],
        [$r->policy(), ['default' => 'US', 'failover' => ['GB', 'US'], 'honor_client_hints' => false, 'pick' => 'legacy']],
        [$r->resolve('GB', 'visitor-1'), route('eu-2', 'lon-a')],
        [$r->resolve('ZZ'), route('us-1', 'sjc-a')],
    ];
};

// 16. APCu: a fresh process (simulated by clearing the twin's per-process state) finds the
//     table in APCu without parsing, and the last good table survives a corrupt file
//     even in a process that never read the good one.
$cases['APCu table cache and last good table'] = static function (): ?array {
    if (!(function_exists('apcu_enabled') && apcu_enabled())) {
        return null; // skipped: needs -d apc.enable_cli=1
    }
    global $tempDir;
    $forgetProcessState = Closure::bind(static function (): void {
        self::$paths = [];
    }, null, RegionRouter::class);
    $path = $tempDir . '/apcu.json';
    file_put_contents($path, json_encode(snapshot([P . 'region/DE' => DE_REGION], 51)));
    $first = new RegionRouter($path);
    $forgetProcessState();
    $second = new RegionRouter($path);
    $secondStats = $second->stats();
    file_put_contents($path . '.tmp', '{"format":1,"revision":52,"kvs":');
    rename($path . '.tmp', $path);
    $forgetProcessState();
    $third = new RegionRouter($path);
    $thirdStats = $third->stats();

    return [
        [$first->stats()['apcu_hits'], 0],
        [[$secondStats['apcu_hits'], $secondStats['revision']], [1, 51]],
        [$second->resolve('DE', 'visitor-4'), route('eu-1', 'ams-a')],
        [[$thirdStats['revision'], $thirdStats['failed_loads'], $thirdStats['loads']], [51, 1, 0]],
        [$third->resolve('DE', 'visitor-1'), route('eu-1', 'fra-b')],
    ];
};

// The cohort function (php/Cohort.php) on the fixtures dw-routing's stage tests pin too.
$cases['cohort points'] = static function (): array {
    require_once dirname(__DIR__, 2) . '/php/Cohort.php';
    $checks = [];
    foreach ([['eu-map', 'edge-1', 1139], ['eu-map', 'edge-2', 8098], ['a', '', 6843], ['', 'b', 631],
        ['stage.x_1', 'fra-17', 7569], ['z', 'é', 2217]] as [$stage, $node, $point]) {
        $checks[] = [[$stage, $node, DwCohort::point($stage, $node)], [$stage, $node, $point]];
    }
    $fra = ['site' => 'fra'];
    $checks[] = [
        [DwCohort::contains(['points' => 1140], 'eu-map', 'edge-1', []),
            DwCohort::contains(['points' => 1139], 'eu-map', 'edge-1', []),
            DwCohort::contains(['nodes' => ['n']], 's', 'n', []),
            DwCohort::contains(['labels' => $fra], 's', 'm', $fra),
            DwCohort::contains(['labels' => $fra], 's', 'm', ['site' => 'ams']),
            DwCohort::contains([], 's', 'm', $fra)],
        [true, false, true, true, false, false],
    ];

    return $checks;
};

// The stages the agent applied (top-level `stages`), as the extension's 104-stages.phpt.
$cases['applied stages'] = static function (): array {
    $kvs = '"kvs":{"' . P . 'region/US":' . json_encode(US_REGION) . '}';
    $checks = [];
    $none = router(snapshotFile('{"format":1,"revision":3,' . $kvs . '}'));
    $checks[] = [[$none->stages(), $none->stats()['stages']], [[], []]];
    $two = router(snapshotFile('{"format":1,"revision":9,"stages":[{"id":"eu-map","revision":8},'
        . '{"revision":3,"id":"b.2"}],' . $kvs . '}'));
    $checks[] = [
        [$two->stages(), $two->stats()['stages']],
        [['eu-map', 'b.2'], [['id' => 'eu-map', 'revision' => 8], ['id' => 'b.2', 'revision' => 3]]],
    ];
    foreach (['7', '[{"id":5,"revision":1}]', '[{"id":"x","revision":-1}]', '{"id":"x"}'] as $bad) {
        $r = router(snapshotFile('{"format":1,"revision":4,"stages":' . $bad . ',' . $kvs . '}'));
        $checks[] = [[$bad, $r->stages(), $r->revision(), $r->resolve('US')['shard']], [$bad, [], 4, 'us-1']];
    }

    return $checks;
};

// The overlay rule (php/Stages.php, the chaos checker's) on the cases dw-routing's
// tests/it/overlay_cases.rs holds dw_routing::stage::overlay to (overlay-cases.php writes them).
$cases['stage overlay'] = static function (): array {
    require_once dirname(__DIR__, 2) . '/php/Stages.php';
    $file = dirname(__DIR__, 2) . '/crates/routing/tests/overlay-cases.json';
    $doc = json_decode((string) file_get_contents($file), true, 512, JSON_THROW_ON_ERROR);
    $checks = [[count($doc['cases']) >= 40, true]];
    foreach ($doc['cases'] as $case) {
        $node = $case['node'];
        $got = DwStages::overlay($case['kvs'], $case['prefix'], $node['id'] ?? null, $node['labels'] ?? [], $case['revisions']);
        $want = $case['want'];
        $checks[] = [[$case['name'], $got['kvs'], $got['stages'], array_keys($got['problems'])],
            [$case['name'], $want['kvs'], $want['stages'], $want['problems']]];
    }

    return $checks;
};

// Visitor buckets (php/Buckets.php) on the cases dw-routing's tests/it/bucket_cases.rs holds
// dw_routing::buckets to (bucket-cases.php writes them): counts, assignments in their text
// form and error messages, byte for byte.
$cases['visitor buckets: the shared cases'] = static function (): array {
    require_once dirname(__DIR__, 2) . '/php/Buckets.php';
    $doc = json_decode((string) file_get_contents(dirname(__DIR__, 2) . '/crates/routing/tests/bucket-cases.json'), true, 16, JSON_THROW_ON_ERROR);
    $attempt = static function (callable $f): array {
        try {
            return ['ok' => $f()];
        } catch (\DwRouter\BucketError $e) {
            return ['error' => $e->getMessage()];
        }
    };
    $checks = [[[\count($doc['apportion']) >= 10, \count($doc['decode']) >= 30, \count($doc['sequences']) >= 40], [true, true, true]]];
    foreach ($doc['counts'] as $case) {
        $checks[] = [$attempt(static fn () => \DwRouter\Buckets::checkCount($case['n'])), isset($case['error']) ? ['error' => $case['error']] : ['ok' => $case['n']]];
    }
    foreach ($doc['apportion'] as $case) {
        $checks[] = [[$case, $attempt(static fn () => \DwRouter\Buckets::apportion($case['weights'], $case['n']))],
            [$case, isset($case['error']) ? ['error' => $case['error']] : ['ok' => $case['counts']]]];
    }
    foreach ($doc['decode'] as $case) {
        $got = $attempt(static fn () => \DwRouter\Buckets::encode(\DwRouter\Buckets::decode($case['text'], $case['n'], $case['origins'])));
        $checks[] = [[substr($case['text'], 0, 64), $got], [substr($case['text'], 0, 64), isset($case['error']) ? ['error' => $case['error']] : ['ok' => $case['want']]]];
    }
    $steps = 0;
    foreach ($doc['sequences'] as $sequence) {
        $origins = $sequence['origins'];
        $assignment = \DwRouter\Buckets::defaultAssignment($sequence['weights'], $sequence['n']);
        $checks[] = [[$sequence['name'], \DwRouter\Buckets::encode($assignment)], [$sequence['name'], $sequence['default']]];
        foreach ($sequence['steps'] as $index => $step) {
            $steps++;
            $got = $attempt(static fn () => $step['origins'] === $origins
                ? \DwRouter\Buckets::reassign($assignment, $step['weights'])
                : \DwRouter\Buckets::reassignByName($assignment, $origins, $step['origins'], $step['weights']));
            if (isset($step['error'])) {
                $checks[] = [[$sequence['name'], $index, $got], [$sequence['name'], $index, ['error' => $step['error']]]];
                continue;
            }
            $next = $got['ok'] ?? [];
            $moved = 0;
            foreach ($assignment as $bucket => $origin) {
                $moved += (int) ($origins[$origin] !== ($step['origins'][$next[$bucket] ?? -1] ?? null));
            }
            $checks[] = [[$sequence['name'], $index, \DwRouter\Buckets::encode($next), $moved],
                [$sequence['name'], $index, $step['want'], $step['moved']]];
            [$origins, $assignment] = [$step['origins'], $next];
        }
    }
    $checks[] = [$steps >= 100, true];

    return $checks;
};

// The same properties as dw-routing's tests/it/buckets.rs, on the twin (tests/lib/
// bucket-properties.php): 80 seeded sequences of random changes keep the counts exact and
// move exactly the sum of the decreases; from a default assignment, a drain and its restore
// are a round trip whenever the drain shrank no other origin; whatever decode() accepts is
// the one spelling.
$cases['visitor buckets: properties'] = static function (): array {
    require_once dirname(__DIR__) . '/lib/bucket-properties.php';
    mt_srand(4141, MT_RAND_MT19937);
    $checks = [];
    $added = 0;
    $steps = 0;
    $roundTrips = 0;
    for ($s = 0; $s < 80; $s++) {
        $n = [2, 3, 16, 1024, mt_rand(2, 1024)][mt_rand(0, 4)];
        $names = array_map(static fn (int $i): string => "o$i", range(0, mt_rand(0, 5)));
        do {
            $weights = array_map(static fn (): int => bucket_random_weight(), $names);
        } while (array_sum($weights) === 0);
        $assignment = \DwRouter\Buckets::defaultAssignment($weights, $n);
        // A drain and its restore.
        $x = mt_rand(0, \count($names) - 1);
        $drained = $weights;
        $drained[$x] = 0;
        if (array_sum($drained) > 0) {
            $mid = \DwRouter\Buckets::reassign($assignment, $drained);
            $back = \DwRouter\Buckets::reassign($mid, $weights);
            $shrank = false;
            foreach (\DwRouter\Buckets::apportion($weights, $n) as $i => $count) {
                $shrank = $shrank || ($i !== $x && \DwRouter\Buckets::apportion($drained, $n)[$i] < $count);
            }
            $checks[] = [[$s, bucket_step_problems($assignment, $names, $mid, $names, $drained), bucket_step_problems($mid, $names, $back, $names, $weights)], [$s, [], []]];
            if (!$shrank) {
                $roundTrips++;
                $checks[] = [[$s, 'round trip', $back], [$s, 'round trip', $assignment]];
            }
        }
        for ($k = mt_rand(1, 6); $k > 0; $k--) {
            [$newNames, $newWeights] = bucket_random_change($names, $weights, $added);
            if (array_sum($newWeights) === 0) {
                continue;
            }
            $next = $newNames === $names ? \DwRouter\Buckets::reassign($assignment, $newWeights)
                : \DwRouter\Buckets::reassignByName($assignment, $names, $newNames, $newWeights);
            $steps++;
            $checks[] = [[$s, $k, bucket_step_problems($assignment, $names, $next, $newNames, $newWeights)], [$s, $k, []]];
            [$names, $weights, $assignment] = [$newNames, $newWeights, $next];
        }
    }
    $accepted = 0;
    for ($i = 0; $i < 1000; $i++) {
        // Near misses: runs of likely numbers, some mangled by a random byte.
        $runs = [];
        for ($r = mt_rand(0, 4); $r > 0; $r--) {
            $runs[] = ['0', '1', '2', '3', '01'][mt_rand(0, 4)] . ':' . ['0', '1', '2', '3', '4', '02'][mt_rand(0, 5)];
        }
        $text = implode(',', $runs);
        if (mt_rand(0, 3) === 0) {
            $text = substr_replace($text, '0123:, x'[mt_rand(0, 7)], mt_rand(0, \strlen($text)), mt_rand(0, 1));
        }
        try {
            $owners = \DwRouter\Buckets::decode($text, 4, 3);
        } catch (\DwRouter\BucketError) {
            continue;
        }
        $accepted++;
        $checks[] = [[$text, \DwRouter\Buckets::encode($owners), \count($owners)], [$text, $text, 4]];
    }
    $checks[] = [[$steps >= 150, $roundTrips >= 25, $accepted >= 10], [true, true, true]];

    return $checks;
};

// php/Buckets.php's limits that the shared cases leave out (dw-routing's unit tests check
// the same edges): 65,536 origins and one more, a weight of 2^32 - 1 and one more, -1.
$cases['visitor buckets: limits at their edges'] = static function (): array {
    require_once dirname(__DIR__, 2) . '/php/Buckets.php';
    $attempt = static function (callable $f): string {
        try {
            $f();

            return 'ok';
        } catch (\DwRouter\BucketError | \InvalidArgumentException $e) {
            return $e::class . ': ' . $e->getMessage();
        }
    };
    $many = array_fill(0, \DwRouter\Buckets::MAX_ASSIGNED_ORIGINS, 1);
    $many[65535] = 1000000;
    $assignment = \DwRouter\Buckets::defaultAssignment($many, 1024);
    $checks = [[[\DwRouter\Buckets::originOf($assignment, 1023), \DwRouter\Buckets::originOf($assignment, 1024)], [65535, null]]];
    $many[] = 1;
    $checks[] = [$attempt(static fn () => \DwRouter\Buckets::apportion($many, 1024)),
        'DwRouter\\BucketError: region: field `origins`: lists 65537 origins; a bucketed region lists at most 65536'];
    $checks[] = [$attempt(static fn () => \DwRouter\Buckets::apportion([0xFFFFFFFF, 1], 2)), 'ok'];
    foreach ([0x100000000, -1] as $weight) {
        $checks[] = [$attempt(static fn () => \DwRouter\Buckets::apportion([$weight, 1], 2)),
            'InvalidArgumentException: a weight is an integer from 0 to 2^32 - 1'];
    }

    return $checks;
};

// The shared cases of the cache tags (crates/routing/tests/cache-tags-cases.json), which
// dw-routing's Table::cache_tags is held to too; and cacheTags() is null before any
// resolve() and after a reload() changed the table.
$cases['cache tags: the shared cases'] = static function (): array {
    $document = json_decode((string) file_get_contents(__DIR__ . '/../../crates/routing/tests/cache-tags-cases.json'), true, 16, JSON_THROW_ON_ERROR);
    $checks = [];
    foreach ($document['snapshots'] as $snapshot) {
        $kvs = [];
        foreach ($snapshot['kvs'] as $key => $value) {
            $kvs[P . $key] = $value;
        }
        $r = router(snapshotFile(['format' => 1, 'revision' => 7, 'kvs' => (object) $kvs]));
        $checks[] = [$r->cacheTags('DE'), null];
        foreach ($snapshot['cases'] as $case) {
            $args = [$case['geo'], $case['sticky'] ?? null, $case['bucket'] ?? null];
            $r->resolve(...$args);
            $checks[] = [[$args, $r->cacheTags(...$args)], [$args, $case['tags']]];
        }
    }
    $path = snapshotFile(snapshot([P . 'region/DE' => DE_REGION], 8));
    $r = router($path);
    $r->resolve('DE');
    file_put_contents($path, json_encode(snapshot([P . 'region/DE' => DE_REGION], 9)));
    $checks[] = [[$r->reload(), $r->cacheTags('DE')], [true, null]];
    $checks[] = [count($checks) > 30, true];

    return $checks;
};

$passed = 0;
$failed = 0;
foreach ($cases as $name => $case) {
    try {
        $checks = $case();
    } catch (Throwable $e) {
        $failed++;
        echo "FAIL $name: " . $e::class . ': ' . $e->getMessage() . ' at ' . $e->getFile() . ':' . $e->getLine() . "\n";
        continue;
    }
    if ($checks === null) {
        echo "skip $name (needs -d apc.enable_cli=1)\n";
        continue;
    }
    $bad = array_filter($checks, static fn (array $check): bool => $check[0] !== $check[1]);
    if ($bad === []) {
        $passed++;
        echo "ok   $name (" . count($checks) . " checks)\n";
        continue;
    }
    $failed++;
    echo "FAIL $name\n";
    foreach ($bad as $i => [$actual, $expected]) {
        echo "  check $i: got " . json_encode($actual, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES)
            . ', expected ' . json_encode($expected, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES) . "\n";
    }
}

echo "twin-selftest: $passed passed, $failed failed\n";
exit($failed === 0 ? 0 : 1);
