<?php
// A stand-in scrape target and a set of broken "Prometheus" servers, for `php -S` on
// loopback (tests/traffic-ops/run, tests/monitoring/dashboard.sh).
//
// FIXTURE, not a node: until the extension counts answers and dw-agent serves them (issue
// 29's counting half), /metrics serves dw_router_answers_total with the labels the agent
// will serve (node, geo, step, key, origin, shard, kind) and
// dw_router_answers_overflow_total{node}, each counter growing at a known rate (RATES
// below, answers per second) from DW_FIXTURE_T0 (unix seconds), so that a Prometheus
// scraping it has rates to compute and a test has exact numbers to compare them with.
// DW_FIXTURE_NODES names the two nodes (default "mon-agent1 mon-agent2").
//
// The other paths answer /api/v1/query as a broken or protected Prometheus would:
//   /html/api/v1/query   200 with an HTML page (a proxy's login page, a wrong URL)
//   /error/api/v1/query  400 with Prometheus' error JSON
//   /auth/api/v1/query   401
//   /big/api/v1/query    a body of 17 MiB (over dwctl's 16 MiB limit)
//   /slow/api/v1/query   an answer after 3 s
//   /empty/api/v1/query  a valid, empty vector (a Prometheus that scrapes no node)
//   /bearer/api/v1/query that empty vector with `Authorization: Bearer fixture-token`, else 401
//                        (Prometheus' own web server has no bearer tokens; a proxy has)

declare(strict_types=1);

// [node index, geo, step, key, origin, shard, kind, answers per second]
const RATES = [
    [0, 'DE', 'country', 'DE', 'fra-a', 'eu-1', 'plain', 6.0],
    [0, 'DE', 'country', 'DE', 'fra-b', 'eu-1', 'sticky', 2.0],
    [0, 'AT', 'country', 'AT', 'fra-a', 'eu-1', 'plain', 1.0],
    [0, 'BR', 'default', 'US', 'iad-a', 'us-1', 'plain', 0.5],
    [0, 'XX', 'fail_open', '', 'fallback', 'fallback', 'plain', 0.25],
    [1, 'DE', 'country', 'DE', 'fra-a', 'eu-1', 'plain', 4.0],
    [1, 'GB', 'country', 'GB', 'lon-a', 'eu-2', 'plain', 1.0],
    [1, 'other', 'default', 'US', 'iad-a', 'us-1', 'plain', 0.5],
    // An origin id no one should print raw: ESC [2J clears a terminal.
    [1, 'DE', 'country', 'DE', "evil\x1b[2J", 'eu-1', 'plain', 0.25],
];
const OVERFLOW = [0 => 0.5];

$path = parse_url($_SERVER['REQUEST_URI'] ?? '/', PHP_URL_PATH) ?: '/';

function label(string $value): string
{
    return '"' . str_replace(['\\', '"', "\n"], ['\\\\', '\\"', '\\n'], $value) . '"';
}

if ($path === '/metrics') {
    $t0 = (float) (getenv('DW_FIXTURE_T0') ?: 0);
    $elapsed = max(0.0, microtime(true) - $t0);
    $nodes = preg_split('/\s+/', trim(getenv('DW_FIXTURE_NODES') ?: 'mon-agent1 mon-agent2'));
    header('Content-Type: text/plain; version=0.0.4');
    echo "# HELP dw_router_answers_total FIXTURE: answers of resolve() (not requests)\n";
    echo "# TYPE dw_router_answers_total counter\n";
    foreach (RATES as [$node, $geo, $step, $key, $origin, $shard, $kind, $rate]) {
        printf(
            "dw_router_answers_total{node=%s,geo=%s,step=%s,key=%s,origin=%s,shard=%s,kind=%s} %d\n",
            label($nodes[$node]), label($geo), label($step), label($key), label($origin),
            label($shard), label($kind), (int) floor($rate * $elapsed)
        );
    }
    echo "# HELP dw_router_answers_overflow_total FIXTURE: answers past the label bounds\n";
    echo "# TYPE dw_router_answers_overflow_total counter\n";
    foreach (OVERFLOW as $node => $rate) {
        printf("dw_router_answers_overflow_total{node=%s} %d\n", label($nodes[$node]), (int) floor($rate * $elapsed));
    }
    return true;
}

switch ($path) {
    case '/html/api/v1/query':
        header('Content-Type: text/html');
        echo "<html><body>Please log in</body></html>\n";
        return true;
    case '/error/api/v1/query':
        http_response_code(400);
        header('Content-Type: application/json');
        echo '{"status":"error","errorType":"bad_data","error":"1:1: parse error: FIXTURE"}';
        return true;
    case '/auth/api/v1/query':
        http_response_code(401);
        echo "Unauthorized\n";
        return true;
    case '/big/api/v1/query':
        header('Content-Type: application/json');
        echo '{"status":"success","data":{"resultType":"vector","result":[', str_repeat(' ', 17 << 20), ']}}';
        return true;
    case '/bearer/api/v1/query':
        if (($_SERVER['HTTP_AUTHORIZATION'] ?? '') !== 'Bearer fixture-token') {
            http_response_code(401);
            echo "Unauthorized\n";
            return true;
        }
        header('Content-Type: application/json');
        echo '{"status":"success","data":{"resultType":"vector","result":[]}}';
        return true;
    case '/slow/api/v1/query':
        sleep(3);
        // Falls through to an empty answer.
    case '/empty/api/v1/query':
        header('Content-Type: application/json');
        echo '{"status":"success","data":{"resultType":"vector","result":[]}}';
        return true;
}
http_response_code(404);
echo "not found\n";
return true;
