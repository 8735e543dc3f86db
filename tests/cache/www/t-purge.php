<?php

declare(strict_types=1);
// tests/cache/run: purges the fixture page's tag, plainly or (?stale=1) as `stale,tag=`,
// which lets LSCache serve the old page for maxStaleAge while one request refreshes it.
$stale = ($_GET['stale'] ?? '') === '1' ? 'stale,' : '';
header('X-LiteSpeed-Purge: ' . $stale . 'tag=dw-t-page');
echo "purged\n";
