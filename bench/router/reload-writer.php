<?php

declare(strict_types=1);

/*
 * The writer side of the reload-latency benchmark: publishes COUNT new snapshots the way
 * dw-agent does (temp file in the same directory, write, fsync, rename over the name),
 * one every INTERVAL_MS, each with the next revision.
 *
 *   php bench/router/reload-writer.php TEMPLATE PATH FIRST_REVISION COUNT INTERVAL_MS READY_FILE
 *
 * Waits for READY_FILE (the reader is up), creates PATH's directory if needed, and prints
 * JSON {written: {revision: hrtime_ns just before rename}}.
 */

[, $template, $path, $first, $count, $interval, $ready] = $argv + array_fill(0, 7, null);
if ($ready === null) {
    fwrite(STDERR, "usage: reload-writer.php TEMPLATE PATH FIRST_REVISION COUNT INTERVAL_MS READY_FILE\n");
    exit(2);
}
[$first, $count, $interval] = [(int) $first, (int) $count, (float) $interval];

// Every body is built before the clock starts, so the loop only writes and renames.
$snapshot = json_decode((string) file_get_contents($template), true, 512, JSON_THROW_ON_ERROR);
$bodies = [];
for ($k = 0; $k < $count; $k++) {
    $snapshot['revision'] = $first + $k;
    $bodies[$first + $k] = json_encode($snapshot, JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR) . "\n";
}

$waitUntil = hrtime(true) + 30_000_000_000;
while (!file_exists($ready)) {
    if (hrtime(true) > $waitUntil) {
        fwrite(STDERR, "reload-writer: the reader never became ready\n");
        exit(1);
    }
    usleep(2000);
}
$directory = dirname($path);
if (!is_dir($directory)) {
    mkdir($directory, 0755, true);
}
usleep(100_000);

$written = [];
$start = hrtime(true);
foreach ($bodies as $revision => $body) {
    $tmp = "$directory/.snapshot.$revision.tmp";
    $handle = fopen($tmp, 'wb');
    fwrite($handle, $body);
    fsync($handle);
    fclose($handle);
    $written[$revision] = hrtime(true);
    rename($tmp, $path);
    // An absolute schedule, so a late wake-up does not push every later write back.
    $next = $start + (int) (($revision - $first + 1) * $interval * 1e6);
    $sleep = intdiv($next - hrtime(true), 1000);
    if ($sleep > 0) {
        usleep($sleep);
    }
}

echo json_encode(['written' => $written], JSON_THROW_ON_ERROR) . "\n";
