<?php

declare(strict_types=1);
// tests/lsphp/lib/endpoints.sh: php/status.php (copied beside this page) for another
// snapshot: ?snap=PATH as DW_SNAPSHOT_PATH, ?max_age=N as DW_STATUS_MAX_AGE; ?display_errors=1
// turns PHP's display_errors on first (status.php must answer 503 on an error of its own
// whatever that setting says).
if (($_GET['display_errors'] ?? '') === '1') {
    ini_set('display_errors', '1');
}
$_SERVER['DW_SNAPSHOT_PATH'] = (string) ($_GET['snap'] ?? '');
if (isset($_GET['max_age'])) {
    $_SERVER['DW_STATUS_MAX_AGE'] = (string) $_GET['max_age'];
}
require __DIR__ . '/status.php';
