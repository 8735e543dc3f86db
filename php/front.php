<?php

declare(strict_types=1);

/*
 * The front controller of the demo stack (scripts/stack: OpenLiteSpeed -> lsphp, or
 * nginx -> php-fpm, then this file).
 *
 * Routes the visitor by the CDN's CF-IPCountry header and answers with the route in
 * headers and a one-line body:
 *
 *   X-DW-Shard, X-DW-Origin   the route
 *   X-DW-Bucket               the visitor's bucket routed by (only with buckets on)
 *   X-DW-Revision             etcd revision of the routing table this answer came from
 *                             (answeredRevision(): a reload between resolve() and
 *                             revision() would pair one table's route with the next one's
 *                             revision)
 *   X-DW-Stage                the ids of the stages the answering table applies, comma
 *                             separated, when this node is in a staged rollout's cohort
 *                             (absent otherwise)
 *   X-DW-Worker               the PHP worker's pid (php-fpm worker or lsphp child; each has
 *                             its own watcher)
 *   X-DW-Clock                (DW_TEST_HOOKS only) hrtime() when the route was read: orders
 *                             one worker's answers in the e2e test
 *   X-DW-Reload               (DW_TEST_HOOKS only) how this worker notices a new snapshot:
 *                             inotify or poll (stats()['reload_mechanism'])
 *   X-DW-Route-Ns             (DW_TEST_HOOKS only) nanoseconds from before `new RegionRouter`
 *                             to after revision(): a fresh worker's first request includes
 *                             loading the table, unless MINIT preloaded it
 *   X-DW-Parent               (DW_TEST_HOOKS only, where ext/posix is loaded) the worker's
 *                             parent pid: tells which process tree answered (an lsphp
 *                             child whose parent was replaced is reparented)
 *
 * The sticky key (the pick hashes it instead of the country) comes from the X-DW-Sticky
 * header or the dw_sticky cookie (with DW_CACHE_TTL: the cookie only).
 *
 * Visitor buckets (docs/routing.md, "Buckets"): when the table in use has `buckets: N`
 * (RegionRouter::buckets() > 0; an extension without buckets() counts as off), the
 * visitor's bucket comes from the dw_bucket cookie (php/BucketCookie.php: read from the raw
 * Cookie header, kept only in its canonical spelling below N) and goes to resolve() beside
 * the sticky key (a sticky key wins, then the bucket, then the country). A visitor without
 * a valid one gets a bucket drawn uniformly and `Set-Cookie: dw_bucket=B; Max-Age=31536000;
 * Path=/; SameSite=Lax; HttpOnly` (`; Secure` over HTTPS: the server's HTTPS variable, or
 * X-Forwarded-Proto / CF-Visitor from an address in DW_TRUSTED_PROXIES), and that response
 * is never cached (`X-LiteSpeed-Cache-Control: no-cache`, `Cache-Control: private,
 * no-store`). X-DW-Bucket names the bucket routed by. With N off nothing of this runs: no
 * cookie is read or set and the page is today's.
 *
 * Server variables the web server may set:
 *   DW_SNAPSHOT_PATH  a snapshot path other than ini dw_router.snapshot_path (the userland
 *                     twin has no ini entries, so a node without the extension sets it)
 *   DW_ROUTING=off    the same page without routing (the benchmarks' baseline)
 *   DW_SUBDIVISIONS=on  route by subdivision too: the geo becomes `CC-SUB` from
 *                     CF-IPCountry and Cloudflare's cf-region-code header (its visitor
 *                     location headers, e.g. `US` + `CA` -> `US-CA`), when both are present
 *                     and the region code is 1-3 of A-Z0-9. Opt-in: it changes the geo, and so
 *                     the answer, of every country that has subdivision keys
 *                     (region/US-CA); a subdivision without a key of its own answers exactly
 *                     as its country (docs/routing.md, "The chain").
 *   DW_CACHE_TTL=N    (1..=86400 s; unset, 0 or anything else: off, today's page) let
 *                     LiteSpeed's page cache store the page for N s, tagged with what its
 *                     answer depended on, so that dw-agent's purges (php/purge.php) drop
 *                     exactly the pages a change may change (docs/deploy-litespeed.md,
 *                     "Caching routed pages"). The page then routes only from what the cache
 *                     keys on: the geo from ?dw_geo= (the vhost's rewrite rule copies
 *                     CF-IPCountry there) and the sticky key from the dw_sticky cookie alone
 *                     (the cache varies on it and on dw_bucket: ols-run
 *                     --cache-vary-cookie dw_sticky,dw_bucket). It
 *                     sends `X-LiteSpeed-Cache-Control: public,max-age=N` and
 *                     `X-LiteSpeed-Tag: <cacheTags()>` only when dw_geo is the geo routed and
 *                     the answering table is still the one in use (and the tags fit in
 *                     8000 bytes, and DW_SUBDIVISIONS is off: the cache key has no
 *                     cf-region-code, and php/StickyCookie.php finds that the raw Cookie
 *                     header names the same dw_sticky as $_COOKIE: no `dw.sticky`,
 *                     `DW_STICKY`, duplicates, ...), and no dw_bucket cookie is being
 *                     set, and N did not change while the page was made; a page whose
 *                     origin the visitor's bucket picked gets the tag `dw:b` from
 *                     cacheTags() (given resolve()'s arguments), which a change of N
 *                     purges (policy/global:buckets); else
 *                     `X-LiteSpeed-Cache-Control: no-cache` (routed by the header as ever).
 *   DW_TEST_HOOKS=1   honour ?hold_ms=N (at most 1000; the e2e test keeps requests in
 *                     flight to reach every worker: held before the route is read) and
 *                     ?hold_after_ms=N (at most 3000; held after the route, the tags and
 *                     the answering revision are read, before the headers go out: the page
 *                     answered from the old table reaches the cache after a purge, as in
 *                     tests/cache/run's race check), and send X-DW-Clock. Never set it on
 *                     a public server.
 */

$server = $_SERVER;
$testHooks = ($server['DW_TEST_HOOKS'] ?? '') === '1';
if ($testHooks && isset($_GET['hold_ms']) && is_string($_GET['hold_ms'])) {
    usleep(1000 * max(0, min(1000, (int) $_GET['hold_ms'])));
}

$country = is_string($server['HTTP_CF_IPCOUNTRY'] ?? null) ? $server['HTTP_CF_IPCOUNTRY'] : '';
$subdivision = ($server['DW_SUBDIVISIONS'] ?? 'off') === 'on' ? ($server['HTTP_CF_REGION_CODE'] ?? null) : null;
if (is_string($subdivision) && preg_match('/^[A-Z]{2}\z/', $country) === 1
    && preg_match('/^[A-Z0-9]{1,3}\z/', $subdivision) === 1) {
    $country .= '-' . $subdivision;
}
// Page caching (DW_CACHE_TTL): the sticky key only from the cookie the cache varies on,
// and a page cached only when the cache key's geo is the geo routed and its sticky key is
// the one the cache files it under.
$cacheTtl = (string) ($server['DW_CACHE_TTL'] ?? '');
$cacheTtl = preg_match('/^[1-9][0-9]{0,4}\z/', $cacheTtl) === 1 && (int) $cacheTtl <= 86400 ? (int) $cacheTtl : 0;
if ($cacheTtl > 0) {
    // The cookie as PHP reads it, cacheable only when the raw header (what LSCache keys on)
    // says the same (php/StickyCookie.php: PHP rewrites `dw.sticky` to dw_sticky, ...).
    require_once __DIR__ . '/StickyCookie.php';
    ['key' => $sticky, 'cacheable' => $stickyCacheable] = \DwRouter\StickyCookie::forCache($server, $_COOKIE);
} else {
    $sticky = $server['HTTP_X_DW_STICKY'] ?? $_COOKIE['dw_sticky'] ?? null;
    $sticky = is_string($sticky) && $sticky !== '' ? $sticky : null;
}
$started = $testHooks ? hrtime(true) : 0; // X-DW-Route-Ns only

if (($server['DW_ROUTING'] ?? 'on') === 'off') {
    $route = ['shard' => '-', 'origin' => '-'];
    $revision = 0;
    $router = null;
    $stage = '';
} else {
    // The userland twin only where the extension is absent: with it, no file to include.
    if (!class_exists('RegionRouter', false)) {
        require_once __DIR__ . '/bootstrap.php';
    }
    // A bare `new RegionRouter()` (the ini's path) is the cheapest form: the extension
    // then runs no constructor call.
    $path = $server['DW_SNAPSHOT_PATH'] ?? '';
    $router = is_string($path) && $path !== '' ? new RegionRouter($path) : new RegionRouter();
    // Visitor buckets: only when the table has N; an extension without buckets() is off.
    $buckets = method_exists($router, 'buckets') ? $router->buckets() : 0;
    if ($buckets > 0) {
        require_once __DIR__ . '/BucketCookie.php';
        $visitor = \DwRouter\BucketCookie::forRequest($server, $buckets);
        $bucket = $visitor['bucket'];
        $setBucket = $visitor['set_cookie'];
        $route = $router->resolve($country, $sticky, $bucket);
    } else {
        $route = $router->resolve($country, $sticky);
    }
    $revision = $router->answeredRevision();
    // The stages this node's table applies (a staged rollout's cohort), named only when
    // the table in use is the one that answered.
    $stages = $router->stages();
    $stage = $stages !== [] && $router->revision() === $revision ? implode(',', $stages) : '';
    if ($cacheTtl > 0) {
        // With DW_SUBDIVISIONS the geo depends on cf-region-code, which the cache key
        // does not hold: a country's page would be served to its subdivisions.
        // A page that sets dw_bucket is never stored (the cache would hand that bucket to
        // every cookie-less visitor), nor one made while N changed (its bucket was read
        // for the old N).
        $bucketCacheable = !isset($setBucket) && ($buckets === 0 || $router->buckets() === $buckets);
        $tags = ($_GET['dw_geo'] ?? null) === $country && ($server['DW_SUBDIVISIONS'] ?? 'off') !== 'on' && $stickyCacheable
            && $bucketCacheable ? (isset($bucket) ? $router->cacheTags($country, $sticky, $bucket) : $router->cacheTags($country, $sticky)) : null;
        $cacheTags = $tags !== null && $router->revision() === $revision ? implode(',', $tags) : null;
        // A response header has to stay within the server's limits (a long policy.failover
        // list of missing keys makes many tags): past 8000 bytes the page is not cached.
        $cacheTags = $cacheTags !== null && strlen($cacheTags) <= 8000 ? $cacheTags : null;
    }
}
$clock = hrtime(true);
if ($testHooks && isset($_GET['hold_after_ms']) && is_string($_GET['hold_after_ms'])) {
    usleep(1000 * max(0, min(3000, (int) $_GET['hold_after_ms'])));
}

header('Content-Type: text/plain; charset=utf-8');
if (isset($setBucket)) {
    // The visitor's new bucket: no cache (LSCache, a CDN, the browser's) may keep this page.
    header('Set-Cookie: ' . $setBucket, false);
    header('Cache-Control: private, no-store');
    header('X-LiteSpeed-Cache-Control: no-cache');
} elseif ($cacheTtl === 0) {
    header('Cache-Control: no-store');
} elseif (isset($cacheTags)) {
    // Stored by LiteSpeed (and purged by tag); browsers and CDNs revalidate every time.
    header('Cache-Control: no-cache');
    header("X-LiteSpeed-Cache-Control: public,max-age=$cacheTtl");
    header('X-LiteSpeed-Tag: ' . $cacheTags);
} else {
    header('Cache-Control: no-store');
    header('X-LiteSpeed-Cache-Control: no-cache');
}
header('X-DW-Shard: ' . $route['shard']);
header('X-DW-Origin: ' . $route['origin']);
header('X-DW-Revision: ' . $revision);
if (isset($bucket)) {
    header('X-DW-Bucket: ' . $bucket);
}
if ($stage !== '') {
    header('X-DW-Stage: ' . $stage);
}
header('X-DW-Worker: ' . getmypid());
if ($testHooks) {
    header('X-DW-Clock: ' . $clock);
    header('X-DW-Reload: ' . ($router?->stats()['reload_mechanism'] ?? 'none'));
    header('X-DW-Route-Ns: ' . ($clock - $started));
    if (function_exists('posix_getppid')) {
        header('X-DW-Parent: ' . posix_getppid());
    }
}

// The country is the visitor's input: print it only as a bounded, printable token.
$shown = preg_replace('/[^A-Za-z0-9_-]/', '?', substr($country, 0, 16));
printf("country %s -> shard %s, origin %s (revision %d, worker %d)\n",
    $shown === '' ? '(none)' : $shown, $route['shard'], $route['origin'], $revision, getmypid());
