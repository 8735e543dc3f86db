<?php

declare(strict_types=1);

/*
 * The purge endpoint's logic (php/purge.php serves it): who may call it, and the tags a
 * call purges. It needs no routing table and works with or without the extension.
 * docs/deploy-litespeed.md, "Caching routed pages". The caller's token must hash
 * (SHA-256 of its 64 hex characters, the one form dw-agent writes) to the content of
 * `<snapshot>.purge-sha256`, read only if php/TrustedFile.php trusts it
 * (docs/snapshot-trust.md, rules 1-5, every directory from `/` included).
 */

namespace DwRouter;

require_once __DIR__ . '/CacheTags.php';
require_once __DIR__ . '/Settings.php';
require_once __DIR__ . '/TrustedFile.php';

final class PurgeEndpoint
{
    public const DEFAULT_SNAPSHOT_PATH = '/run/dw-router/routing.json';
    /** The file beside the snapshot holding the SHA-256 of the agent's secret. */
    public const SHA_SUFFIX = '.purge-sha256';

    /**
     * Answers one request: [status, headers, body]. 405 for a non-POST; 403 unless the
     * `Authorization: Bearer <64 lower-case hex>` token hashes to the trusted sha file's
     * content; then the body's tags (CacheTags::ofPurgeBody: 400, 413), or 200 with
     * `X-LiteSpeed-Purge`. Nothing is purged on any error.
     *
     * @param array<array-key, mixed> $server $_SERVER
     * @param callable(int): (string|false) $readBody reads at most that many bytes of the body
     * @return array{0: int, 1: array<string, string>, 2: string}
     */
    public static function handle(array $server, callable $readBody): array
    {
        $headers = ['Content-Type' => 'text/plain; charset=utf-8', 'Cache-Control' => 'no-store',
            'X-LiteSpeed-Cache-Control' => 'no-cache'];
        if (($server['REQUEST_METHOD'] ?? '') !== 'POST') {
            return [405, $headers + ['Allow' => 'POST'], "only POST\n"];
        }
        $refusal = self::refusal($server);
        if ($refusal !== null) {
            return [403, $headers, "forbidden: $refusal\n"];
        }
        $length = $server['CONTENT_LENGTH'] ?? null;
        if (is_numeric($length) && (int) $length > CacheTags::MAX_BODY_BYTES) {
            return [413, $headers, "body over " . CacheTags::MAX_BODY_BYTES . " bytes\n"];
        }
        $body = $readBody(CacheTags::MAX_BODY_BYTES + 1);
        $tags = CacheTags::ofPurgeBody(\is_string($body) ? $body : '');
        if (\is_int($tags)) {
            $why = $tags === 400 ? 'malformed purge line (or no line)' : 'over the limits (1000 lines, 64 KiB, 8000-byte header)';

            return [$tags, $headers, "refused: $why\n"];
        }

        return [200, $headers + ['X-LiteSpeed-Purge' => CacheTags::purgeHeader($tags)], 'purged ' . \count($tags) . " tags\n"];
    }

    /** The snapshot path: server var DW_SNAPSHOT_PATH, ini dw_router.snapshot_path, the default. */
    public static function snapshotPath(array $server): string
    {
        $path = $server['DW_SNAPSHOT_PATH'] ?? null;

        return \is_string($path) && $path !== '' ? $path
            : (Settings::iniString('dw_router.snapshot_path') ?? self::DEFAULT_SNAPSHOT_PATH);
    }

    /** Why the caller is refused (403); null when its token is the agent's. */
    private static function refusal(array $server): ?string
    {
        $auth = $server['HTTP_AUTHORIZATION'] ?? $server['REDIRECT_HTTP_AUTHORIZATION'] ?? null;
        if (!\is_string($auth) || preg_match('/\ABearer ([0-9a-f]{64})\z/', $auth, $m) !== 1) {
            return 'no bearer token';
        }
        $sha = self::trustedSha(self::snapshotPath($server) . self::SHA_SUFFIX, $server);
        if (\is_string($sha)) {
            return $sha;
        }
        // The agent writes the SHA-256 of the token's text, its 64 hex characters
        // (crates/agent/src/purge.rs, write_token_hash): that one form only.
        return hash_equals($sha['sha'], hash('sha256', $m[1])) ? null : 'wrong token';
    }

    /**
     * The 64 hex characters of the sha file (64 and a newline, at most 65 bytes), read by
     * TrustedFile (docs/snapshot-trust.md, rules 1-5; the trusted owner: ini
     * dw_router.trusted_owner, else server var DW_TRUSTED_OWNER, else the directory's
     * owner); else why not.
     *
     * @param array<array-key, mixed> $server
     * @return array{sha: string}|string
     */
    private static function trustedSha(string $path, array $server): array|string
    {
        $read = TrustedFile::read('secret file', $path, 65, TrustedFile::owner($server));
        if (\is_string($read)) {
            return $read;
        }
        if (preg_match('/\A([0-9a-f]{64})\n\z/', $read['bytes'], $m) !== 1) {
            return 'secret file malformed';
        }

        return ['sha' => $m[1]];
    }
}
