--TEST--
php/front.php page caching (DW_CACHE_TTL): off by default (today's headers, sticky from the header); on: cached only when ?dw_geo= is the geo routed and a table answered, tagged with cacheTags(), the sticky key from the dw_sticky cookie only
--EXTENSIONS--
dw_router
--SKIPIF--
<?php if (!function_exists('proc_open')) die('skip proc_open() disabled'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
$origins = array_map(fn ($i) => "fra-$i", range(1, 8));
dw_publish($path, 41, [
    'region/DE' => dw_region('eu-1', $origins, array_fill_keys($origins, 1)),
    'region/US' => dw_region('us-1', ['iad-a'], ['iad-a' => 1]),
]);
// Two sticky keys the pick sends to other origins than the country's own hash key.
$router = new RegionRouter($path);
$plain = $router->resolve('DE')['origin'];
$sticky = [];
for ($i = 0; count($sticky) < 2 && $i < 1000; $i++) {
    if ($router->resolve('DE', "v$i")['origin'] !== $plain && !in_array($router->resolve('DE', "v$i")['origin'], array_map(fn ($k) => $router->resolve('DE', $k)['origin'], $sticky), true)) {
        $sticky[] = "v$i";
    }
}
[$header, $cookie] = $sticky;
$originOf = fn (?string $key) => $key === null ? $plain : $router->resolve('DE', $key)['origin'];

// php -S on loopback, with the extension, front.php behind the fixture's router script.
$server = null;
for ($try = 0; $try < 5 && $server === null; $try++) {
    $port = random_int(20000, 60000);
    $proc = proc_open([PHP_BINARY, '-n', '-d', 'extension=' . dw_extension_path(), '-S', "127.0.0.1:$port",
        __DIR__ . '/fixtures/front-router.php'], [1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
    if (dw_wait_until(fn () => @fsockopen('127.0.0.1', $port) !== false, 3.0)) {
        $server = $proc;
    } else {
        proc_terminate($proc);
        proc_close($proc);
    }
}
if ($server === null) {
    die("no php -S\n");
}

$get = function (array $headers, string $query = '') use ($port, $path) {
    $headers += ['X-Test-Snapshot' => $path];
    $lines = [];
    foreach ($headers as $name => $value) {
        $lines[] = "$name: $value";
    }
    $context = stream_context_create(['http' => ['header' => implode("\r\n", $lines), 'ignore_errors' => true]]);
    file_get_contents("http://127.0.0.1:$port/index.php$query", false, $context);
    $shown = [];
    // PHP 8.5 deprecates $http_response_header; its replacement exists from 8.4 on.
    foreach (http_get_last_response_headers() ?? [] as $line) {
        if (preg_match('/^(Cache-Control|X-LiteSpeed-[A-Za-z-]+|X-DW-(Shard|Origin|Revision)):/i', $line)) {
            $shown[] = $line;
        }
    }
    return $shown;
};
$show = function (string $label, array $headers) use ($plain, $originOf, $header, $cookie) {
    $names = [$originOf($header) => 'ORIGIN(header key)', $originOf($cookie) => 'ORIGIN(cookie key)', $plain => 'ORIGIN(country)'];
    echo "$label\n";
    foreach ($headers as $line) {
        $line = strlen($line) > 200 ? strstr($line, ':', true) . ': (' . (strlen($line) - strlen(strstr($line, ':', true)) - 2) . ' bytes)' : $line;
        echo '  ', preg_replace_callback('/^(X-DW-Origin: )(.*)$/', fn ($m) => $m[1] . ($names[$m[2]] ?? $m[2]), $line), "\n";
    }
};

$show('off (no DW_CACHE_TTL): today\'s page, sticky from the header', $get(['CF-IPCountry' => 'DE', 'X-DW-Sticky' => $header, 'Cookie' => "dw_sticky=$cookie"], '?dw_geo=DE'));
$show('off: sticky from the cookie when no header', $get(['CF-IPCountry' => 'DE', 'Cookie' => "dw_sticky=$cookie"]));
foreach (['0', '86401', 'abc', '-5', '300s', ''] as $ttl) {
    $show("DW_CACHE_TTL=\"$ttl\": off", $get(['CF-IPCountry' => 'DE', 'X-Test-Cache-Ttl' => $ttl], '?dw_geo=DE'));
}
$show('on: dw_geo is the header: cached, tagged', $get(['CF-IPCountry' => 'DE', 'X-Test-Cache-Ttl' => '300'], '?dw_geo=DE'));
$show('on, 86400: the fallback answer carries its chain tags', $get(['CF-IPCountry' => 'FR', 'X-Test-Cache-Ttl' => '86400'], '?dw_geo=FR'));
$show('on: X-DW-Sticky is ignored, the cookie is used', $get(['CF-IPCountry' => 'DE', 'X-Test-Cache-Ttl' => '1', 'X-DW-Sticky' => $header, 'Cookie' => "dw_sticky=$cookie"], '?dw_geo=DE'));
$show('on: X-DW-Sticky alone is ignored', $get(['CF-IPCountry' => 'DE', 'X-Test-Cache-Ttl' => '300', 'X-DW-Sticky' => $header], '?dw_geo=DE'));
$show('on: dw_geo differs from the header: routed by the header, not cached', $get(['CF-IPCountry' => 'DE', 'X-Test-Cache-Ttl' => '300'], '?dw_geo=US'));
$show('on: no dw_geo: not cached', $get(['CF-IPCountry' => 'DE', 'X-Test-Cache-Ttl' => '300']));
$show('on: dw_geo but no header: not cached', $get(['X-Test-Cache-Ttl' => '300'], '?dw_geo=DE'));
$show('on, DW_SUBDIVISIONS=on: not cached, even without cf-region-code', $get(['CF-IPCountry' => 'DE', 'X-Test-Cache-Ttl' => '300', 'X-Test-Subdivisions' => 'on'], '?dw_geo=DE'));
$show('on, DW_SUBDIVISIONS=on: not cached with it', $get(['CF-IPCountry' => 'DE', 'CF-Region-Code' => 'BY', 'X-Test-Cache-Ttl' => '300', 'X-Test-Subdivisions' => 'on'], '?dw_geo=DE'));
$show('on: no table (fail-open at revision 0): not cached', $get(['CF-IPCountry' => 'DE', 'X-Test-Cache-Ttl' => '300', 'X-Test-Snapshot' => "$dir/missing.json"], '?dw_geo=DE'));

// The X-LiteSpeed-Tag value at 8000 bytes is cached, at 8001 not: `dw,dw:r:US,dw:m:zz,
// dw:m:d0,dw:chain` is 35 bytes, 75 failover keys of 100 bytes add 106 each (7950), and
// one of 9 (10) bytes adds 15 (16).
foreach ([9, 10] as $lastKey) {
    $failover = array_map(fn ($i) => sprintf('f%03d', $i) . str_repeat('x', 96), range(1, 75));
    $failover[] = str_repeat('y', $lastKey);
    $failover[] = 'US';
    $long = "$dir/long-$lastKey.json";
    dw_publish($long, 42, ['region/US' => dw_region('us-1', ['iad-a'], ['iad-a' => 1]),
        'policy/global' => json_encode(['default' => 'd0', 'failover' => $failover])]);
    $inProcess = new RegionRouter($long);
    $inProcess->resolve('zz');
    echo 'tags of zz: ', strlen(implode(',', $inProcess->cacheTags('zz'))), " bytes\n";
    $show("on: tags of $lastKey-byte last key", $get(['CF-IPCountry' => 'zz', 'X-Test-Cache-Ttl' => '300', 'X-Test-Snapshot' => $long], '?dw_geo=zz'));
}

proc_terminate($server);
proc_close($server);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
off (no DW_CACHE_TTL): today's page, sticky from the header
  Cache-Control: no-store
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(header key)
  X-DW-Revision: 41
off: sticky from the cookie when no header
  Cache-Control: no-store
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(cookie key)
  X-DW-Revision: 41
DW_CACHE_TTL="0": off
  Cache-Control: no-store
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(country)
  X-DW-Revision: 41
DW_CACHE_TTL="86401": off
  Cache-Control: no-store
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(country)
  X-DW-Revision: 41
DW_CACHE_TTL="abc": off
  Cache-Control: no-store
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(country)
  X-DW-Revision: 41
DW_CACHE_TTL="-5": off
  Cache-Control: no-store
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(country)
  X-DW-Revision: 41
DW_CACHE_TTL="300s": off
  Cache-Control: no-store
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(country)
  X-DW-Revision: 41
DW_CACHE_TTL="": off
  Cache-Control: no-store
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(country)
  X-DW-Revision: 41
on: dw_geo is the header: cached, tagged
  Cache-Control: no-cache
  X-LiteSpeed-Cache-Control: public,max-age=300
  X-LiteSpeed-Tag: dw,dw:r:DE
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(country)
  X-DW-Revision: 41
on, 86400: the fallback answer carries its chain tags
  Cache-Control: no-cache
  X-LiteSpeed-Cache-Control: public,max-age=86400
  X-LiteSpeed-Tag: dw,dw:r:US,dw:m:FR,dw:m:continent/EU,dw:chain,dw:cont
  X-DW-Shard: us-1
  X-DW-Origin: iad-a
  X-DW-Revision: 41
on: X-DW-Sticky is ignored, the cookie is used
  Cache-Control: no-cache
  X-LiteSpeed-Cache-Control: public,max-age=1
  X-LiteSpeed-Tag: dw,dw:r:DE
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(cookie key)
  X-DW-Revision: 41
on: X-DW-Sticky alone is ignored
  Cache-Control: no-cache
  X-LiteSpeed-Cache-Control: public,max-age=300
  X-LiteSpeed-Tag: dw,dw:r:DE
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(country)
  X-DW-Revision: 41
on: dw_geo differs from the header: routed by the header, not cached
  Cache-Control: no-store
  X-LiteSpeed-Cache-Control: no-cache
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(country)
  X-DW-Revision: 41
on: no dw_geo: not cached
  Cache-Control: no-store
  X-LiteSpeed-Cache-Control: no-cache
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(country)
  X-DW-Revision: 41
on: dw_geo but no header: not cached
  Cache-Control: no-store
  X-LiteSpeed-Cache-Control: no-cache
  X-DW-Shard: us-1
  X-DW-Origin: iad-a
  X-DW-Revision: 41
on, DW_SUBDIVISIONS=on: not cached, even without cf-region-code
  Cache-Control: no-store
  X-LiteSpeed-Cache-Control: no-cache
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(country)
  X-DW-Revision: 41
on, DW_SUBDIVISIONS=on: not cached with it
  Cache-Control: no-store
  X-LiteSpeed-Cache-Control: no-cache
  X-DW-Shard: eu-1
  X-DW-Origin: ORIGIN(country)
  X-DW-Revision: 41
on: no table (fail-open at revision 0): not cached
  Cache-Control: no-store
  X-LiteSpeed-Cache-Control: no-cache
  X-DW-Shard: us-1
  X-DW-Origin: iad-a
  X-DW-Revision: 0
tags of zz: 8000 bytes
on: tags of 9-byte last key
  Cache-Control: no-cache
  X-LiteSpeed-Cache-Control: public,max-age=300
  X-LiteSpeed-Tag: (8000 bytes)
  X-DW-Shard: us-1
  X-DW-Origin: iad-a
  X-DW-Revision: 42
tags of zz: 8001 bytes
on: tags of 10-byte last key
  Cache-Control: no-store
  X-LiteSpeed-Cache-Control: no-cache
  X-DW-Shard: us-1
  X-DW-Origin: iad-a
  X-DW-Revision: 42
