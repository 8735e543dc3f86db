<?php

declare(strict_types=1);
// tests/cache/run: a page of the cache fixture's own (no routing): cached 300 s, tagged
// dw-t-page, made in ?ms= milliseconds (at most 2000); X-T-Made says when PHP made it.
header('X-LiteSpeed-Cache-Control: public,max-age=300');
header('X-LiteSpeed-Tag: dw-t-page');
$ms = is_string($_GET['ms'] ?? null) ? max(0, min(2000, (int) $_GET['ms'])) : 0;
usleep(1000 * $ms);
header('X-T-Made: ' . hrtime(true));
echo "made\n";
