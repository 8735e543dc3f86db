--TEST--
A reload whose routing_digest is the table's own keeps the table (only origins changed) and reports the new revision; a changed region re-parses
--EXTENSIONS--
dw_router
--INI--
dw_router.poll_interval_ms=600000
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$base = dw_test_dir(__FILE__);
$dir = "$base/later";
$path = "$dir/dw-routing.json";
// No directory yet: the router polls, and with this interval only reload() reloads.
$router = new RegionRouter($path);
// stats() waits for the watch set-up, which finds no directory: polling it stays.
var_dump($router->revision(), $router->stats()['reload_mechanism']);
mkdir($dir);

$kvs = [
    'region/DE' => dw_region('eu-1', ['fra-a', 'fra-b'], ['fra-a' => 50, 'fra-b' => 50]),
    'region/US' => dw_region('us-1', ['iad-a'], ['iad-a' => 1]),
    'policy/global' => '{"default":"US"}',
    'origin/fra-a' => '{"addr":"10.1.0.1:443"}',
];
$a = 'xxh3-128/1:0123456789abcdef0123456789abcdef';
$b = 'xxh3-128/1:fedcba9876543210fedcba9876543210';
function show(RegionRouter $router, string $what): void
{
    $stats = $router->stats();
    $de = $router->resolve('DE');
    echo "$what: revision=", $router->revision(), ' answered=', $router->answeredRevision(),
        ' stats.revision=', $stats['revision'], ' loads=', $stats['loads'],
        ' reused=', $stats['reloads_reused'], ' tables=', $stats['tables_in_process'],
        ' DE=', $de['shard'], '/', $de['origin'], ' FR=', $router->resolve('FR')['shard'], "\n";
}

dw_write_atomic($path, dw_snapshot_digest(10, $kvs, $a));
var_dump($router->reload());
show($router, 'parsed');
$explainedBefore = $router->explain('DE');

// Only origin records change (a put, a new one), with the same digest: the table is kept.
$kvs['origin/fra-a'] = '{"addr":"10.1.0.9:443"}';
$kvs['origin/fra-c'] = '{"addr":"10.1.0.3:443"}';
dw_write_atomic($path, dw_snapshot_digest(11, $kvs, $a));
var_dump($router->reload());
show($router, 'reused');
// Another router of the path, and explain(), see the revision the table now answers for.
$other = new RegionRouter($path);
echo 'other=', $other->revision(), ' explain=', $router->explain('DE')['revision'],
    ' before=', $explainedBefore['revision'], "\n";
unset($other);

// Again: each reuse is counted.
dw_write_atomic($path, dw_snapshot_digest(12, $kvs, $a));
var_dump($router->reload());
show($router, 'reused again');

// A region's value changes, and so does the digest: parsed.
$kvs['region/DE'] = dw_region('eu-2', ['fra-b'], ['fra-b' => 1]);
dw_write_atomic($path, dw_snapshot_digest(13, $kvs, $b));
var_dump($router->reload());
show($router, 'region changed');

// A file without a digest is parsed, and a digest equal to one from before that file
// is no longer the table's: parsed too.
dw_publish($path, 14, $kvs);
var_dump($router->reload());
show($router, 'no digest');
dw_write_atomic($path, dw_snapshot_digest(15, $kvs, $b));
var_dump($router->reload());
show($router, 'digest after none');
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(0)
string(4) "poll"
bool(true)
parsed: revision=10 answered=10 stats.revision=10 loads=1 reused=0 tables=1 DE=eu-1/fra-b FR=us-1
bool(true)
reused: revision=11 answered=11 stats.revision=11 loads=2 reused=1 tables=1 DE=eu-1/fra-b FR=us-1
other=11 explain=11 before=10
bool(true)
reused again: revision=12 answered=12 stats.revision=12 loads=3 reused=2 tables=1 DE=eu-1/fra-b FR=us-1
bool(true)
region changed: revision=13 answered=13 stats.revision=13 loads=4 reused=2 tables=1 DE=eu-2/fra-b FR=us-1
bool(true)
no digest: revision=14 answered=14 stats.revision=14 loads=5 reused=2 tables=1 DE=eu-2/fra-b FR=us-1
bool(true)
digest after none: revision=15 answered=15 stats.revision=15 loads=6 reused=2 tables=1 DE=eu-2/fra-b FR=us-1
