<?php

declare(strict_types=1);

/*
 * The reader side of the reload-latency benchmark: a worker that keeps routing.
 *
 *   php -d extension=... -d dw_router.snapshot_path=PATH bench/router/reload-reader.php READY_FILE LAST_REVISION TIMEOUT_S
 *
 * Builds one router, touches READY_FILE, then loops on resolve() + revision() (never
 * reload(): the extension must notice by itself) and records hrtime(true) the first time
 * it sees each revision. Stops at LAST_REVISION or after TIMEOUT_S seconds; prints JSON
 * {mechanism, seen: {revision: hrtime_ns}, iterations}.
 */

[, $ready, $lastRevision, $timeout] = $argv + [null, null, null, null];
if ($ready === null || $lastRevision === null || $timeout === null) {
    fwrite(STDERR, "usage: reload-reader.php READY_FILE LAST_REVISION TIMEOUT_S\n");
    exit(2);
}
$lastRevision = (int) $lastRevision;

$router = new RegionRouter();
$mechanism = $router->stats()['reload_mechanism'];
$revision = $router->revision();
$seen = [];
touch($ready);

$deadline = hrtime(true) + (int) ((float) $timeout * 1e9);
$iterations = 0;
while (true) {
    $router->resolve('DE');
    $now = $router->revision();
    if ($now !== $revision) {
        $seen[$now] = hrtime(true);
        $revision = $now;
        if ($now >= $lastRevision) {
            break;
        }
    }
    if ((++$iterations & 1023) === 0 && hrtime(true) > $deadline) {
        break;
    }
}

echo json_encode([
    'mechanism' => $mechanism,
    'final_mechanism' => $router->stats()['reload_mechanism'],
    'seen' => $seen,
    'iterations' => $iterations,
    'loads' => $router->stats()['loads'],
    'failed_loads' => $router->stats()['failed_loads'],
], JSON_THROW_ON_ERROR) . "\n";
