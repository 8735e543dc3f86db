<?php

declare(strict_types=1);

/*
 * resolve() at each step of the geography chain (bench/11-geo.sh), in one process.
 *
 *   php -d extension=SO -d dw_router.snapshot_path=FILE bench/router/geo.php wall ROUNDS TARGET_MS VARIANTS
 *       times each variant (interleaved round by round, order rotated) and prints JSON:
 *       the median ns per iteration of each, and of the empty loop.
 *   valgrind --tool=callgrind --dump-before=usleep php ... geo.php callgrind ITERATIONS VARIANTS
 *       runs each variant's loop in turn with a usleep(0) before each and after the last, so
 *       dump part k+1 holds the k-th loop's instructions; prints the order run as JSON.
 *
 * VARIANTS is a comma-separated list of geo[:sticky] (the router is built once, as by a
 * worker). Every variant first checks that its geo answers from the key it is meant to
 * (explain()), so a figure is never a different step's.
 */

$mode = $argv[1] ?? '';
$router = new RegionRouter();

function loop_empty(string $geo, int $n, ?RegionRouter $router): void
{
    for ($i = 0; $i < $n; $i++) {
        $route = $geo;
    }
}

function loop_geo(string $geo, int $n, RegionRouter $router): void
{
    for ($i = 0; $i < $n; $i++) {
        $route = $router->resolve($geo);
    }
}

function loop_sticky(string $geo, string $sticky, int $n, RegionRouter $router): void
{
    for ($i = 0; $i < $n; $i++) {
        $route = $router->resolve($geo, $sticky);
    }
}

/** @return array{0: string, 1: ?string} */
function variant(string $spec): array
{
    $parts = explode(':', $spec, 2);

    return [$parts[0], $parts[1] ?? null];
}

function run(string $spec, int $n, RegionRouter $router): void
{
    if ($spec === 'empty') {
        loop_empty('DE', $n, $router);

        return;
    }
    [$geo, $sticky] = variant($spec);
    $sticky === null ? loop_geo($geo, $n, $router) : loop_sticky($geo, $sticky, $n, $router);
}

$variants = explode(',', (string) ($argv[$mode === 'wall' ? 4 : 3] ?? ''));
$answered = [];
foreach ($variants as $spec) {
    [$geo, $sticky] = variant($spec);
    $answered[$spec] = method_exists($router, 'explain') ? $router->explain($geo, $sticky)['answered_by'] : null;
    run($spec, 1000, $router); // warm: memo filled
}
// The inotify watch is set up on a thread of its own (src/watch.rs); until it is, every
// resolve() reads the clock to poll. Under callgrind that thread is slow to run: wait for
// it (at most 5 s), so that no loop pays for the start-up. time_nanosleep, not usleep:
// usleep marks callgrind's dump parts.
for ($wait = 0; $wait < 5000 && method_exists($router, 'stats')
    && ($router->stats()['reload_mechanism'] ?? 'inotify') !== 'inotify'; $wait++) {
    time_nanosleep(0, 1_000_000);
    $router->resolve('DE');
}

if ($mode === 'wall') {
    $rounds = (int) $argv[2];
    $targetNs = (int) $argv[3] * 1_000_000;
    $all = ['empty', ...$variants];
    $n = [];
    foreach ($all as $spec) {
        for ($count = 1000; ; $count *= 2) {
            $t = hrtime(true);
            run($spec, $count, $router);
            if (hrtime(true) - $t > $targetNs / 8 || $count >= 4_000_000) {
                $n[$spec] = (int) min(4_000_000, $count * 8);
                break;
            }
        }
    }
    $samples = [];
    for ($r = 0; $r < $rounds; $r++) {
        $order = array_merge(array_slice($all, $r % count($all)), array_slice($all, 0, $r % count($all)));
        foreach ($order as $spec) {
            $t = hrtime(true);
            run($spec, $n[$spec], $router);
            $samples[$spec][] = (hrtime(true) - $t) / $n[$spec];
        }
    }
    $median = [];
    foreach ($samples as $spec => $values) {
        sort($values);
        $median[$spec] = $values[intdiv(count($values), 2)];
    }
    echo json_encode(['median_ns' => $median, 'iterations' => $n, 'answered_by' => $answered]), "\n";
} elseif ($mode === 'callgrind') {
    $iterations = (int) $argv[2];
    $order = ['empty', ...$variants];
    foreach ($order as $spec) {
        usleep(0);
        run($spec, $iterations, $router);
    }
    usleep(0);
    echo json_encode(['order' => $order, 'iterations' => $iterations, 'answered_by' => $answered]), "\n";
} else {
    fwrite(STDERR, "usage: geo.php wall ROUNDS TARGET_MS VARIANTS | callgrind ITERATIONS VARIANTS\n");
    exit(2);
}
