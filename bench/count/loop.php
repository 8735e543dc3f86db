<?php
/*
 * The loop bench/12-count.sh runs under callgrind: `php loop.php SNAPSHOT MODE N`.
 * Warms up (every label set registered, every memo filled), then usleep(0), then N
 * resolve() calls of MODE, then usleep(0): with --dump-before=usleep, callgrind's part 2
 * holds the N measured calls alone.
 *   memo    no sticky key, 50 country codes in turn (the front controller's call)
 *   sticky  the same countries with a sticky key (no memo)
 *   bucket  the same countries with a visitor bucket (0 to 63; the snapshot's policy has
 *           `buckets`: the answering region's assignment, no country memo)
 */
[$script, $snapshot, $mode, $n] = $argv;
$n = (int) $n;
$router = new RegionRouter($snapshot);
$countries = ['DE', 'FR', 'US', 'GB', 'JP', 'BR', 'IN', 'CN', 'AU', 'CA', 'IT', 'ES', 'NL', 'SE', 'PL',
    'MX', 'AR', 'ZA', 'EG', 'NG', 'KR', 'ID', 'TR', 'RU', 'UA', 'CH', 'AT', 'BE', 'DK', 'NO',
    'FI', 'IE', 'PT', 'GR', 'CZ', 'HU', 'RO', 'BG', 'HR', 'RS', 'SK', 'SI', 'LT', 'LV', 'EE',
    'IS', 'NZ', 'SG', 'HK', 'TW'];
$keys = [];
for ($i = 0; $i < 64; $i++) {
    $keys[] = "user-$i";
}
$run = static function (int $n) use ($router, $countries, $keys, $mode): void {
    if ($mode === 'memo') {
        for ($i = 0; $i < $n; $i++) {
            $router->resolve($countries[$i % 50]);
        }
    } elseif ($mode === 'bucket') {
        for ($i = 0; $i < $n; $i++) {
            $router->resolve($countries[$i % 50], null, $i & 63);
        }
    } else {
        for ($i = 0; $i < $n; $i++) {
            $router->resolve($countries[$i % 50], $keys[$i & 63]);
        }
    }
};
$run(50 * 64 * 2);
usleep(0);
$run($n);
usleep(0);
