<?php

declare(strict_types=1);

/*
 * The visitor's bucket (docs/routing.md, "Buckets"; issue 41): the `dw_bucket` cookie, a
 * decimal b in 0..N-1 in its one canonical spelling (`0`, or a non-zero digit then digits:
 * no sign, no leading zero, no exponent, no white space), where N is the routing table's
 * `buckets` (RegionRouter::buckets(), 0 when buckets are off).
 *
 * The value is read from the raw Cookie header, never from $_COOKIE: LiteSpeed's page cache
 * files a page under the raw bytes of the first cookie named exactly `dw_bucket` (the vary
 * rule), while PHP rewrites ` `, `.` and `[` in names to `_`, keeps the first of duplicates
 * and URL-decodes values (php/StickyCookie.php has the details). So a bucket is taken only
 * when the header holds exactly one pair named exactly `dw_bucket`, nothing else in it (nor
 * in its URL-decoded form) looks like the name (`dw?bucket` in any case, up to 3 bytes
 * between), the header is at most MAX_HEADER_BYTES, and the value is canonical for N.
 *
 * Anything else (absent, `dw.bucket=1`, `DW_BUCKET=1`, two of them, `999`, `-1`, `01`,
 * `1e2`, a 4 KB value, a bucket from a larger N) draws a new bucket uniformly with
 * random_int(0, N-1) and answers with the Set-Cookie line that stores it; a response that
 * sets the cookie must not be cached (front.php sends it with `no-cache`), so the cache only
 * ever holds pages filed under a canonical bucket of the current N: at most N + 1 variants
 * of a URL per geo and sticky key (N buckets, and no cookie while buckets were off).
 *
 * Changing N, the re-mapping rule: a bucket still below the new N is kept; one at or above
 * it is not canonical any more and is drawn again uniformly. For a smaller N that keeps the
 * visitors uniform over 0..N-1 whatever the old N (the kept ones were uniform below N, the
 * re-drawn ones are), where `b mod N` would favour the low buckets unless N divides the old
 * N (1024 -> 1000 would double buckets 0..23). A larger N cannot be told from the cookie
 * (it holds no N): the returning visitors keep their buckets below the old N until the
 * cookie is drawn again, see docs/routing.md.
 *
 * Secure: added when the request came over HTTPS, as the server says ($_SERVER['HTTPS'] set
 * and not `off`), or as a scheme header says (X-Forwarded-Proto's first value, or
 * CF-Visitor's {"scheme":"https"}) only when REMOTE_ADDR is one of DW_TRUSTED_PROXIES (a
 * server variable: addresses or CIDR blocks, IPv4 or IPv6, separated by `,` or spaces; an
 * entry that does not parse trusts nothing). No I/O, no extension beyond what
 * `--disable-all` keeps (pcre, standard, json).
 *
 *     $n = $router->buckets();
 *     $visitor = \DwRouter\BucketCookie::forRequest($_SERVER, $n);
 *     if ($visitor['set_cookie'] !== null) {
 *         header('Set-Cookie: ' . $visitor['set_cookie'], false); // and do not cache this page
 *     }
 *     $route = $router->resolve($geo, $sticky, $visitor['bucket']);
 */

namespace DwRouter;

final class BucketCookie
{
    /** The cookie the cache varies on (`RewriteRule .* - [E=cache-vary:dw_sticky,dw_bucket]`). */
    public const NAME = 'dw_bucket';
    /** One year, in seconds. */
    public const MAX_AGE = 31536000;
    /** The longest raw Cookie header a bucket is read from, in bytes (as StickyCookie's). */
    public const MAX_HEADER_BYTES = 8192;
    /** The most buckets a table may have (policy `buckets`, 2 to 1024; php/Buckets.php). */
    public const MAX_BUCKETS = 1024;
    /** The longest DW_TRUSTED_PROXIES read, in bytes; past it nothing is trusted. */
    public const MAX_TRUSTED_PROXIES_BYTES = 4096;

    /**
     * The visitor's bucket for a table of $n buckets.
     *
     * `bucket`: the bucket to route by (null when $n is 0: buckets off, no cookie read or
     * set). `set_cookie`: the Set-Cookie value to send (without the header's name), or null
     * when the visitor's cookie is kept. `cacheable`: false exactly when `set_cookie` is not
     * null (that response must not be stored by a shared cache). `reason`: why the bucket
     * was drawn (`absent`, `invalid`, `not canonical for N`), or `kept`, or `off`.
     *
     * @param array<mixed> $server $_SERVER
     * @return array{bucket: ?int, set_cookie: ?string, cacheable: bool, reason: string}
     * @throws \ValueError when $n is neither 0 nor 2..MAX_BUCKETS
     */
    public static function forRequest(array $server, int $n): array
    {
        if ($n === 0) {
            return ['bucket' => null, 'set_cookie' => null, 'cacheable' => true, 'reason' => 'off'];
        }
        if ($n < 2 || $n > self::MAX_BUCKETS) {
            throw new \ValueError("buckets is $n, not 0 (off) or 2 to " . self::MAX_BUCKETS);
        }
        $raw = $server['HTTP_COOKIE'] ?? null;
        $value = \is_string($raw) ? self::rawValue($raw) : null;
        if ($value !== null && self::isCanonical($value, $n)) {
            return ['bucket' => (int) $value, 'set_cookie' => null, 'cacheable' => true, 'reason' => 'kept'];
        }
        $reason = match (true) {
            $value === null && (!\is_string($raw) || !self::mentions($raw)) => 'absent',
            $value !== null && self::isCanonical($value, self::MAX_BUCKETS) => 'not canonical for N',
            default => 'invalid',
        };
        $bucket = random_int(0, $n - 1);

        return ['bucket' => $bucket, 'set_cookie' => self::setCookie($bucket, self::isHttps($server)), 'cacheable' => false, 'reason' => $reason];
    }

    /** Whether $value is b in 0..$n-1 in its one spelling: `0`, or 1-9 then digits. */
    public static function isCanonical(string $value, int $n): bool
    {
        return preg_match('/^(0|[1-9][0-9]{0,3})\z/', $value) === 1 && (int) $value < $n;
    }

    /** The Set-Cookie value that stores $bucket for a year, site-wide. */
    public static function setCookie(int $bucket, bool $secure): string
    {
        return self::NAME . '=' . $bucket . '; Max-Age=' . self::MAX_AGE . '; Path=/; SameSite=Lax; HttpOnly'
            . ($secure ? '; Secure' : '');
    }

    /**
     * Whether the visitor reached us over HTTPS: the server's HTTPS variable (set, not empty,
     * not `off`), or, from a peer in DW_TRUSTED_PROXIES only, X-Forwarded-Proto (its first
     * value) or CF-Visitor saying https.
     *
     * @param array<mixed> $server $_SERVER
     */
    public static function isHttps(array $server): bool
    {
        $https = $server['HTTPS'] ?? null;
        if (\is_string($https) && $https !== '' && strtolower($https) !== 'off') {
            return true;
        }
        if (!self::fromTrustedProxy($server)) {
            return false;
        }
        $proto = $server['HTTP_X_FORWARDED_PROTO'] ?? null;
        if (\is_string($proto) && strtolower(trim(explode(',', $proto, 2)[0])) === 'https') {
            return true;
        }
        $visitor = $server['HTTP_CF_VISITOR'] ?? null;
        if (\is_string($visitor) && \strlen($visitor) <= 256) {
            $decoded = json_decode($visitor, true, 2);

            return \is_array($decoded) && ($decoded['scheme'] ?? null) === 'https';
        }

        return false;
    }

    /**
     * Whether REMOTE_ADDR is one of DW_TRUSTED_PROXIES (addresses or CIDR blocks). Unset or
     * empty: none is trusted. An entry that does not parse matches nothing.
     *
     * @param array<mixed> $server $_SERVER
     */
    public static function fromTrustedProxy(array $server): bool
    {
        $list = $server['DW_TRUSTED_PROXIES'] ?? null;
        $peer = $server['REMOTE_ADDR'] ?? null;
        if (!\is_string($list) || $list === '' || \strlen($list) > self::MAX_TRUSTED_PROXIES_BYTES || !\is_string($peer)) {
            return false;
        }
        $peerBytes = self::address($peer);
        if ($peerBytes === null) {
            return false;
        }
        foreach (preg_split('/[\s,]+/', $list, -1, PREG_SPLIT_NO_EMPTY) ?: [] as $entry) {
            if (self::inBlock($peerBytes, $entry)) {
                return true;
            }
        }

        return false;
    }

    /** Whether $peer (packed) lies in $entry, `ADDRESS` or `ADDRESS/BITS`. */
    private static function inBlock(string $peer, string $entry): bool
    {
        $parts = explode('/', $entry);
        if (\count($parts) > 2) {
            return false;
        }
        $net = self::address($parts[0]);
        if ($net === null || \strlen($net) !== \strlen($peer)) {
            return false;
        }
        $max = 8 * \strlen($net);
        if (!isset($parts[1])) {
            $bits = $max;
        } elseif (preg_match('/^(0|[1-9][0-9]{0,2})\z/', $parts[1]) === 1 && (int) $parts[1] <= $max) {
            $bits = (int) $parts[1];
        } else {
            return false;
        }
        $whole = intdiv($bits, 8);
        if (substr($peer, 0, $whole) !== substr($net, 0, $whole)) {
            return false;
        }
        $rest = $bits % 8;
        if ($rest === 0) {
            return true;
        }
        $mask = (0xFF << (8 - $rest)) & 0xFF;

        return (\ord($peer[$whole]) & $mask) === (\ord($net[$whole]) & $mask);
    }

    /** An address packed (4 or 16 bytes; an IPv4-mapped IPv6 address as its 4), or null. */
    private static function address(string $text): ?string
    {
        if ($text === '' || \strlen($text) > 45 || preg_match('/^[0-9A-Fa-f:.]+\z/', $text) !== 1) {
            return null;
        }
        $packed = @inet_pton($text);
        if (!\is_string($packed)) {
            return null;
        }
        if (\strlen($packed) === 16 && str_starts_with($packed, str_repeat("\0", 10) . "\xFF\xFF")) {
            return substr($packed, 12);
        }

        return $packed;
    }

    /** Whether the header, or its URL-decoded form, holds anything like the cookie's name. */
    private static function mentions(string $raw): bool
    {
        $like = '/dw.{0,3}bucket/is';

        return preg_match($like, $raw) === 1 || preg_match($like, rawurldecode($raw)) === 1;
    }

    /**
     * The value of the one pair named exactly `dw_bucket`, when the header (at most
     * MAX_HEADER_BYTES) and its decoded form mention the name exactly once and that pair is
     * it; else null.
     */
    private static function rawValue(string $raw): ?string
    {
        if (\strlen($raw) > self::MAX_HEADER_BYTES) {
            return null;
        }
        $like = '/dw.{0,3}bucket/is';
        if (preg_match_all($like, $raw) !== 1 || preg_match_all($like, rawurldecode($raw)) !== 1) {
            return null;
        }
        $exact = [];
        foreach (explode(';', $raw) as $pair) {
            $pair = ltrim($pair, " \t\n\r\v\f");
            if (str_starts_with($pair, self::NAME . '=')) {
                $exact[] = substr($pair, \strlen(self::NAME) + 1);
            }
        }

        return \count($exact) === 1 ? $exact[0] : null;
    }
}
