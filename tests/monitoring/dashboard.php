<?php
// Evaluates a Grafana dashboard's queries against a running Prometheus, as Grafana would
// send them: each query variable (label_values(METRIC{SELECTOR}, LABEL)) is resolved
// through /api/v1/label/LABEL/values, and its values substituted the way Grafana does for
// a multi-value selection (regex-escaped, `(a|b)`); $__rate_interval becomes RATE_INTERVAL.
// Then every panel target's expr goes to /api/v1/query; it must parse and return at least
// one series. Then every annotation query (annotations.list) goes to /api/v1/query_range,
// as Grafana runs one: over the last ANNOTATION_RANGE (10m) at the annotation's step; it
// must parse and return at least one sample, and every label its titleFormat, textFormat
// and tagKeys name must be on each series it returns. Grafana's built-in annotation (no
// query) is named and not counted; any other annotation without a Prometheus expr fails.
// One line per check ("  ok   ..." or "  FAIL ..."), counted by tests/monitoring/run.
//
//   php tests/monitoring/dashboard.php DASHBOARD.json http://127.0.0.1:PORT [RATE_INTERVAL]

declare(strict_types=1);

[$self, $file, $prometheus] = $argv + [null, null, null];
$rateInterval = $argv[3] ?? '10s';
if ($file === null || $prometheus === null) {
    fwrite(STDERR, "usage: $self DASHBOARD.json PROMETHEUS_URL [RATE_INTERVAL]\n");
    exit(2);
}

function ok(string $what): void { echo "  ok   $what\n"; }
function fail(string $what, string $why): void { echo "  FAIL $what\n       $why\n"; }

/** GET PATH?QUERY from Prometheus; the decoded answer or a string saying why not. */
function api(string $base, string $path, array $query): array|string
{
    $url = $base . $path . '?' . http_build_query($query);
    $context = stream_context_create(['http' => ['timeout' => 10, 'ignore_errors' => true]]);
    $body = @file_get_contents($url, false, $context);
    if ($body === false) {
        return "no answer from $url";
    }
    $answer = json_decode($body, true);
    if (!is_array($answer)) {
        return "not JSON from $url: " . substr($body, 0, 200);
    }
    if (($answer['status'] ?? '') !== 'success') {
        return ($answer['errorType'] ?? 'error') . ': ' . ($answer['error'] ?? substr($body, 0, 200));
    }
    return $answer;
}

/** Grafana's escaping of a value inside a Prometheus regex (prometheusSpecialRegexEscape). */
function regexEscape(string $value): string
{
    return preg_replace('/[\\\\^$*+?.()|{}\[\]]/', '\\\\\\\\$0', $value);
}

function substitute(string $expr, array $values, string $rateInterval): string
{
    $expr = str_replace(['$__rate_interval', '${__rate_interval}'], $rateInterval, $expr);
    // Longest names first: $fleet_job before $job would not matter, $node_x before $node does.
    uksort($values, fn($a, $b) => strlen($b) <=> strlen($a));
    foreach ($values as $name => $value) {
        $expr = str_replace(['${' . $name . '}', '$' . $name], $value, $expr);
    }
    return $expr;
}

$dashboard = json_decode((string) @file_get_contents($file), true);
if (!is_array($dashboard) || !isset($dashboard['panels'], $dashboard['templating']['list'])) {
    fail("$file is a dashboard (panels, templating)", 'not JSON, or no panels/templating');
    exit(0);
}

// The variables, in order (later ones refer to earlier ones).
$values = [];
foreach ($dashboard['templating']['list'] as $variable) {
    $name = $variable['name'] ?? '?';
    if (($variable['type'] ?? '') !== 'query') {
        continue;
    }
    $definition = is_array($variable['query']) ? ($variable['query']['query'] ?? '') : (string) $variable['query'];
    if (!preg_match('/^label_values\((.+),\s*(\w+)\)$/s', $definition, $m)) {
        fail("variable \$$name: $definition", 'not of the form label_values(METRIC{SELECTOR}, LABEL)');
        continue;
    }
    $match = substitute($m[1], $values, $rateInterval);
    $answer = api($prometheus, '/api/v1/label/' . rawurlencode($m[2]) . '/values', ['match[]' => $match]);
    if (is_string($answer)) {
        fail("variable \$$name: $definition", $answer);
        continue;
    }
    $found = $answer['data'];
    if ($found === []) {
        fail("variable \$$name: $definition", "no values for match[]=$match");
        continue;
    }
    $values[$name] = '(' . implode('|', array_map('regexEscape', $found)) . ')';
    ok("variable \$$name = " . implode(', ', $found));
}

// Every target of every panel (rows' own panels too, when collapsed).
$panels = [];
foreach ($dashboard['panels'] as $panel) {
    $panels[] = $panel;
    foreach ($panel['panels'] ?? [] as $inner) {
        $panels[] = $inner;
    }
}
$ids = [];
foreach ($panels as $panel) {
    $title = $panel['title'] ?? '(untitled)';
    $id = $panel['id'] ?? null;
    if ($id === null || isset($ids[$id])) {
        fail("panel \"$title\" has a unique id", 'id ' . var_export($id, true) . ' missing or repeated');
    }
    $ids[$id] = true;
    foreach ($panel['targets'] ?? [] as $target) {
        $what = "panel \"$title\" [" . ($target['refId'] ?? '?') . ']';
        $expr = substitute((string) ($target['expr'] ?? ''), $values, $rateInterval);
        if (preg_match('/\$\w+/', $expr, $left)) {
            fail($what, "unknown variable {$left[0]} in: $expr");
            continue;
        }
        $answer = api($prometheus, '/api/v1/query', ['query' => $expr]);
        if (is_string($answer)) {
            fail($what, "$answer\n       query: $expr");
            continue;
        }
        $series = count($answer['data']['result'] ?? []);
        if ($series === 0) {
            fail($what, "no series for: $expr");
            continue;
        }
        ok("$what: $series series");
    }
}

// Every annotation, evaluated as Grafana does: a range query at its step.
const ANNOTATION_RANGE = 600;
$annotations = $dashboard['annotations']['list'] ?? [];
foreach ($annotations as $annotation) {
    $name = (string) ($annotation['name'] ?? '(unnamed)');
    $what = "annotation \"$name\"";
    if (!empty($annotation['builtIn'])) {
        echo "  --   $what: Grafana's built-in (alerts and annotations stored in Grafana), no query\n";
        continue;
    }
    $expr = (string) ($annotation['expr'] ?? ($annotation['target']['expr'] ?? ''));
    if ($expr === '') {
        fail($what, 'no Prometheus expr to evaluate (the checker reads expr or target.expr)');
        continue;
    }
    $expr = substitute($expr, $values, $rateInterval);
    if (preg_match('/\$\w+/', $expr, $left)) {
        fail($what, "unknown variable {$left[0]} in: $expr");
        continue;
    }
    $step = (string) ($annotation['step'] ?? '60s');
    // Now to the millisecond: a sample scraped in this second is inside the range.
    $end = round(microtime(true), 3);
    $answer = api($prometheus, '/api/v1/query_range', [
        'query' => $expr, 'start' => sprintf('%.3f', $end - ANNOTATION_RANGE),
        'end' => sprintf('%.3f', $end), 'step' => $step,
    ]);
    if (is_string($answer)) {
        fail($what, "$answer\n       query: $expr");
        continue;
    }
    $series = $answer['data']['result'] ?? [];
    $samples = array_sum(array_map(fn($one) => count($one['values'] ?? []), $series));
    if ($samples === 0) {
        fail($what, "no samples over the last " . ANNOTATION_RANGE . " s (step $step) for: $expr");
        continue;
    }
    // The labels its title, text and tags read ({{label}}, tagKeys "a,b").
    preg_match_all('/\{\{\s*(\w+)\s*\}\}/', ($annotation['titleFormat'] ?? '') . ' ' . ($annotation['textFormat'] ?? ''), $m);
    $labels = array_merge($m[1], array_filter(array_map('trim', explode(',', (string) ($annotation['tagKeys'] ?? '')))));
    $missing = [];
    foreach ($series as $one) {
        foreach ($labels as $label) {
            if (!isset($one['metric'][$label])) {
                $missing[$label] = true;
            }
        }
    }
    if ($missing !== []) {
        fail($what, 'labels its title, text or tags read are not on its series: ' . implode(', ', array_keys($missing)) . "\n       query: $expr");
        continue;
    }
    $shown = implode(', ', array_map(fn($one) => json_encode($one['metric'] ?? []), $series));
    ok("$what: " . count($series) . " series, $samples samples ($shown)");
}
