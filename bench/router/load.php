<?php

declare(strict_types=1);

/*
 * The cost of reading a snapshot: the first router a fresh process builds.
 *
 *   php [ini...] bench/router/load.php ext|twin SNAPSHOT
 *
 * Both build the router and ask it for its revision, the first use (the extension reads
 * the file when a router is first used, not when it is made):
 * ext: `new RegionRouter()` (ini dw_router.snapshot_path = SNAPSHOT): read, parse,
 * validate, set up the watch. twin: `new \DwRouter\RegionRouter(SNAPSHOT)` with APCu
 * empty: read, json_decode, APCu store. Prints the nanoseconds it took.
 */

[, $mode, $snapshot] = $argv + [null, null, null];
if ($mode === 'ext') {
    $start = hrtime(true);
    $router = new RegionRouter();
    $revision = $router->revision();
    $elapsed = hrtime(true) - $start;
} elseif ($mode === 'twin' && $snapshot !== null) {
    require __DIR__ . '/../../php/RegionRouter.php';
    $start = hrtime(true);
    $router = new \DwRouter\RegionRouter($snapshot);
    $revision = $router->revision();
    $elapsed = hrtime(true) - $start;
} else {
    fwrite(STDERR, "usage: load.php ext|twin SNAPSHOT\n");
    exit(2);
}
if ($revision === 0) {
    fwrite(STDERR, "load.php: no table loaded from $snapshot\n");
    exit(1);
}
echo $elapsed, "\n";
