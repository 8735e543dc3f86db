<?php

declare(strict_types=1);

/*
 * The sticky key of a page LiteSpeed's page cache may store (docs/deploy-litespeed.md,
 * "What a cached page may depend on"). LSCache files a page under the raw bytes of the
 * cookie named exactly `dw_sticky` (the vary rule); PHP fills $_COOKIE by its own rules
 * (main/php_variables.c): it turns ` ` and `.` in a name into `_`, and `[` too when no `]`
 * follows, drops leading white space, keeps the first of two cookies of one name and
 * URL-decodes the value. So `Cookie: dw.sticky=K` is $_COOKIE['dw_sticky'] = K while LSCache
 * sees no dw_sticky: a page routed by K would be served to every cookie-less visitor of the
 * country. A page is cacheable only when both views provably agree: see forCache(). No I/O,
 * no extension beyond what `--disable-all` keeps (pcre, standard).
 *
 *     $sticky = \DwRouter\StickyCookie::forCache($_SERVER, $_COOKIE);
 *     $route = $router->resolve($geo, $sticky['key']);
 *     // send X-LiteSpeed-Cache-Control: public,... only when $sticky['cacheable']
 */

namespace DwRouter;

final class StickyCookie
{
    /** The cookie the cache varies on (`RewriteRule .* - [E=cache-vary:dw_sticky]`). */
    public const NAME = 'dw_sticky';
    /** The longest cookie value a cacheable page takes as its sticky key, in bytes. */
    public const MAX_VALUE_BYTES = 256;
    /** The longest raw Cookie header a page is cached with, in bytes. */
    public const MAX_HEADER_BYTES = 8192;

    /**
     * The sticky key, and whether a page routed by it may be cached.
     *
     * `key` is what PHP sees ($cookies[NAME] when a non-empty string, else null): the page
     * routes by it either way. `cacheable` is true only when the raw Cookie header
     * ($server['HTTP_COOKIE']) says the same thing to any cookie parser:
     *   - no dw_sticky at all: the raw header (and its URL-decoded form) holds nothing like
     *     `dw?sticky` in any case, with up to 3 bytes between `dw` and `sticky`, and PHP
     *     has no $cookies[NAME]; or
     *   - exactly one: the header, split on `;` with leading white space dropped, has exactly
     *     one pair named exactly `dw_sticky`, nothing else in it (nor its decoded form) looks
     *     like the name, the value is 1 to MAX_VALUE_BYTES bytes of RFC 6265 cookie-octets
     *     other than `%` and `+` (nothing a parser could decode or split), and PHP's value is
     *     those very bytes.
     * Anything else (a rewritten or re-cased name, an encoded one, two of them, an empty or
     * encoded value, a header over MAX_HEADER_BYTES) is not cacheable: a parser that reads it
     * otherwise than PHP would file the page under another visitor's key.
     *
     * @param array<mixed> $server  $_SERVER
     * @param array<mixed> $cookies $_COOKIE
     * @return array{key: ?string, cacheable: bool}
     */
    public static function forCache(array $server, array $cookies): array
    {
        $php = $cookies[self::NAME] ?? null;
        $key = \is_string($php) && $php !== '' ? $php : null;
        $raw = $server['HTTP_COOKIE'] ?? '';

        return ['key' => $key, 'cacheable' => \is_string($raw) && self::agrees($raw, $key, \array_key_exists(self::NAME, $cookies))];
    }

    /** Whether the raw header names exactly the sticky key PHP saw ($key; null: none). */
    private static function agrees(string $raw, ?string $key, bool $phpHasName): bool
    {
        if (\strlen($raw) > self::MAX_HEADER_BYTES) {
            return false;
        }
        $like = '/dw.{0,3}sticky/is';
        $mentions = max(preg_match_all($like, $raw), preg_match_all($like, rawurldecode($raw)));
        if ($mentions === 0) {
            return $key === null && !$phpHasName;
        }
        if ($mentions !== 1 || $key === null) {
            return false;
        }
        $exact = [];
        foreach (explode(';', $raw) as $pair) {
            $pair = ltrim($pair, " \t\n\r\v\f");
            if (str_starts_with($pair, self::NAME . '=')) {
                $exact[] = substr($pair, \strlen(self::NAME) + 1);
            }
        }

        return \count($exact) === 1 && $exact[0] === $key
            && preg_match('/^[\x21\x23\x24\x26-\x2A\x2D-\x3A\x3C-\x5B\x5D-\x7E]{1,' . self::MAX_VALUE_BYTES . '}\z/', $key) === 1;
    }
}
