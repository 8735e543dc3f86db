<?php
/*
 * One process's resolve() cost, for bench/13-count-load.sh: N calls of resolve(GEO) (no
 * sticky key: the memoised call) after a warm-up, timed by getrusage() (this process's
 * CPU time: the closest to perf's cycles where the machine has no hardware counters) and
 * by hrtime() (wall clock). Prints one JSON line.
 *   CLI:   php spin.php SNAPSHOT GEO N
 *   page:  spin.php?geo=GEO&n=N   (behind lsphp: the ini's snapshot path)
 * N is at most 50,000,000.
 */
if (PHP_SAPI === 'cli') {
    [, $snapshot, $geo, $n] = $argv;
    $router = new RegionRouter($snapshot);
} else {
    header('Content-Type: application/json');
    $geo = is_string($_GET['geo'] ?? null) ? $_GET['geo'] : 'DE';
    $n = is_string($_GET['n'] ?? null) ? $_GET['n'] : '100000';
    $router = new RegionRouter();
}
$n = max(1, min((int) $n, 50_000_000));
for ($i = 0; $i < 1000; $i++) {
    $router->resolve($geo);
}
$cpu = static function (): int {
    $r = getrusage();
    return ($r['ru_utime.tv_sec'] + $r['ru_stime.tv_sec']) * 1_000_000_000
        + ($r['ru_utime.tv_usec'] + $r['ru_stime.tv_usec']) * 1000;
};
$c0 = $cpu();
$w0 = hrtime(true);
for ($i = 0; $i < $n; $i++) {
    $router->resolve($geo);
}
$w1 = hrtime(true);
$c1 = $cpu();
echo json_encode([
    'pid' => getmypid(),
    'n' => $n,
    'cpu_ns' => round(($c1 - $c0) / $n, 2),
    'wall_ns' => round(($w1 - $w0) / $n, 2),
    'counting' => $router->traffic()['counting'],
]), "\n";
