<?php

declare(strict_types=1);
// tests/cache/run (lib/cookies.sh): a page of the cache fixture's own (no routing), cached
// 300 s unless ?nocache=1, that says which key LSCache filed it under only through what a
// later request gets: X-T-Made (when PHP made it). X-T-Php says what PHP read as
// $_COOKIE['dw_sticky'] (JSON), X-T-Raw the raw Cookie header (JSON, at most 512 bytes).
if (($_GET['nocache'] ?? '') === '1') {
    header('X-LiteSpeed-Cache-Control: no-cache');
} else {
    header('X-LiteSpeed-Cache-Control: public,max-age=300');
    header('X-LiteSpeed-Tag: dw-t-cookie');
}
header('X-T-Made: ' . hrtime(true));
header('X-T-Php: ' . json_encode($_COOKIE['dw_sticky'] ?? null));
header('X-T-Raw: ' . json_encode(substr((string) ($_SERVER['HTTP_COOKIE'] ?? ''), 0, 512), JSON_INVALID_UTF8_SUBSTITUTE));
echo "made\n";
