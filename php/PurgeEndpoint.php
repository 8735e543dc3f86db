<?php

declare(strict_types=1);

/*
 * The purge endpoint's logic (php/purge.php serves it): who may call it, and the tags a
 * call purges. It needs no routing table and works with or without the extension.
 * docs/deploy-litespeed.md, "Caching routed pages".
 */

namespace DwRouter;

require_once __DIR__ . '/CacheTags.php';
require_once __DIR__ . '/Settings.php';

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
        if (!\is_string($sha) || !str_starts_with($sha, 'sha:')) {
            return \is_string($sha) ? $sha : 'no secret';
        }
        $expected = substr($sha, 4);
        // The SHA-256 of the token as sent (its 64 hex characters); that of the 32 bytes
        // it spells is accepted too (both are preimages of the agent's secret only).
        $ok = hash_equals($expected, hash('sha256', $m[1]));
        $ok = hash_equals($expected, hash('sha256', (string) hex2bin($m[1]))) || $ok;

        return $ok ? null : 'wrong token';
    }

    /**
     * `sha:<64 hex>` from the sha file, read only if it is a regular file (not a symlink)
     * not writable by group or others, in a directory not writable by group or others
     * (unless sticky and a trusted owner is set), owned by root or the trusted owner (ini
     * dw_router.trusted_owner, else server var DW_TRUSTED_OWNER; unset: the directory's
     * owner), its directory too (docs/snapshot-trust.md, rules 1-4); else why not.
     */
    public static function trustedSha(string $path, array $server): string
    {
        clearstatcache(true, $path);
        $lstat = @lstat($path);
        if ($lstat === false) {
            return 'no secret file';
        }
        if (($lstat['mode'] & 0170000) !== 0100000) {
            return 'secret file is not a regular file (or a symlink)';
        }
        if (($lstat['mode'] & 0022) !== 0) {
            return 'secret file writable by group or others';
        }
        $dir = @stat(\dirname($path));
        if ($dir === false) {
            return 'secret file directory unreadable';
        }
        $owner = Settings::iniString('dw_router.trusted_owner')
            ?? (\is_string($server['DW_TRUSTED_OWNER'] ?? null) && $server['DW_TRUSTED_OWNER'] !== '' ? $server['DW_TRUSTED_OWNER'] : null);
        $trusted = $owner === null ? $dir['uid'] : self::uid($owner);
        if ($trusted === null) {
            return 'trusted owner names no user';
        }
        if (($dir['mode'] & 0022) !== 0 && !(($dir['mode'] & 01000) !== 0 && $owner !== null)) {
            return 'secret file directory writable by group or others';
        }
        foreach ([$lstat['uid'], $dir['uid']] as $uid) {
            if ($uid !== 0 && $uid !== $trusted) {
                return 'secret file (or its directory) has an untrusted owner';
            }
        }
        $handle = @fopen($path, 'rb');
        if ($handle === false) {
            return 'secret file unreadable';
        }
        $fstat = fstat($handle);
        $content = stream_get_contents($handle, 66);
        fclose($handle);
        // The file opened is the one judged (no swap between lstat and fopen).
        if ($fstat === false || $fstat['ino'] !== $lstat['ino'] || $fstat['dev'] !== $lstat['dev']) {
            return 'secret file changed while read';
        }
        if (!\is_string($content) || preg_match('/\A([0-9a-f]{64})\n\z/', $content, $m) !== 1) {
            return 'secret file malformed';
        }

        return 'sha:' . $m[1];
    }

    /** A user name's or numeric uid's uid; null when it names no user. */
    private static function uid(string $owner): ?int
    {
        if (preg_match('/\A[0-9]{1,10}\z/', $owner) === 1) {
            return (int) $owner;
        }
        $entry = \function_exists('posix_getpwnam') ? posix_getpwnam($owner) : false;

        return \is_array($entry) ? (int) $entry['uid'] : null;
    }
}
