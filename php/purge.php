<?php

declare(strict_types=1);

/*
 * The purge endpoint dw-agent calls after each publication (`dw-agent --purge-url
 * http://127.0.0.1:PORT/purge.php`), so that LiteSpeed's page cache (LSCache) drops
 * exactly the routed pages the change may have changed (docs/deploy-litespeed.md,
 * "Caching routed pages"). Serve it on a loopback-only vhost or listener.
 *
 *   POST, Authorization: Bearer <the agent's secret, 64 lower-case hex>
 *   body: one line per changed key, `\n`-separated (at most 1000 lines, 64 KiB):
 *     region/<key>                 -> tag=dw:r:<key>, tag=dw:m:<key>, tag=dw:long
 *     policy/global:pick | all     -> tag=dw
 *     policy/global:chain          -> tag=dw:chain
 *     policy/global:continent_of   -> tag=dw:cont
 *
 * Answers 200 with `X-LiteSpeed-Purge: tag=..., tag=...` (LSCache purges those tags);
 * 405 for a non-POST, 403 when the token's SHA-256 is not the one in
 * `<snapshot path>.purge-sha256` (a trusted file the agent writes; compared with
 * hash_equals), 400 for a malformed line, 413 over the limits or when the header would be
 * over 8000 bytes. Any error purges nothing. The snapshot path: server var
 * DW_SNAPSHOT_PATH, else ini dw_router.snapshot_path, else /run/dw-router/routing.json.
 * It reads no routing table: it works with or without the extension.
 */

require_once __DIR__ . '/PurgeEndpoint.php';

$server = $_SERVER;
// A server that keeps Authorization out of $_SERVER may still hand it to getallheaders().
if (!isset($server['HTTP_AUTHORIZATION']) && \function_exists('getallheaders')) {
    foreach (getallheaders() as $name => $value) {
        if (strcasecmp((string) $name, 'Authorization') === 0) {
            $server['HTTP_AUTHORIZATION'] = $value;
        }
    }
}
[$status, $headers, $body] = \DwRouter\PurgeEndpoint::handle(
    $server,
    static fn (int $max): string|false => file_get_contents('php://input', false, null, 0, $max),
);
http_response_code($status);
foreach ($headers as $name => $value) {
    header("$name: $value");
}
echo $body;
