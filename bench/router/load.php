<?php

declare(strict_types=1);

/*
 * The cost of reading a snapshot: the first router a fresh process builds.
 *
 *   php [ini...] bench/router/load.php ext|twin SNAPSHOT
 *
 * ext: `new RegionRouter()` (ini dw_router.snapshot_path = SNAPSHOT): read, parse,
 * validate, set up the watch. twin: `new \DwRouter\RegionRouter(SNAPSHOT)` with APCu
 * empty: read, json_decode, APCu store. Prints the nanoseconds it took.
 */

[, $mode, $snapshot] = $argv + [null, null, null];
if ($mode === 'ext') {
    $start = hrtime(true);
    $router = new RegionRouter();
    $elapsed = hrtime(true) - $start;
} elseif ($mode === 'twin' && $snapshot !== null) {
    require __DIR__ . '/../../php/RegionRouter.php';
    $start = hrtime(true);
    $router = new \DwRouter\RegionRouter($snapshot);
    $elapsed = hrtime(true) - $start;
} else {
    fwrite(STDERR, "usage: load.php ext|twin SNAPSHOT\n");
    exit(2);
}
if ($router->revision() === 0) {
    fwrite(STDERR, "load.php: no table loaded from $snapshot\n");
    exit(1);
}
echo $elapsed, "\n";
