<?php

declare(strict_types=1);

/*
 * Time from an etcd commit to the first HTTP response that reflects it.
 *
 *   php propagation.php command ETCD URL -- CMD ARGS...
 *       Runs CMD (e.g. `dwctl drain ...`) while watching the routing prefix in etcd and
 *       polling URL. The commit time is when etcd's watch delivers the change (the same
 *       stream dw-agent reads); the visible time is the end of the first HTTP response whose
 *       X-DW-Revision is at least the change's revision. Prints one JSON object.
 *
 *   php propagation.php seed ETCD SNAPSHOT
 *       Puts every key of a snapshot file into etcd (transactions of 1,000 puts).
 *
 *   php propagation.php series ETCD URL --changes N [--key region/DE] [--gap-ms 20]
 *       Writes N changes to KEY (alternating valid region values) through etcd's JSON
 *       gateway; for each, the commit time is when the put returns (etcd has committed it),
 *       the visible time as above. Prints one JSON object with every latency (ns).
 *
 * HTTP requests are HTTP/1.0 with one connection each (loopback; about 0.3 ms), so this
 * needs no PHP extension beyond the standard ones.
 */

const PREFIX = '/dw/routing/';

function fail(string $message): never
{
    fwrite(STDERR, "propagation: $message\n");
    exit(1);
}

/** @return array{0: string, 1: int} host and port of an http://host:port URL */
function host_port(string $url): array
{
    $parts = parse_url($url);
    if (!is_array($parts) || !isset($parts['host'], $parts['port'])) {
        fail("not an http://host:port URL: $url");
    }

    return [$parts['host'], $parts['port']];
}

/** One HTTP/1.0 request; returns [status, lower-cased headers, body]. */
function http_request(string $url, string $method = 'GET', string $path = '/', array $headers = [], string $body = ''): array
{
    [$host, $port] = host_port($url);
    $socket = @stream_socket_client("tcp://$host:$port", $errno, $error, 5);
    if ($socket === false) {
        return [0, [], "connect: $error"];
    }
    stream_set_timeout($socket, 10);
    $request = "$method $path HTTP/1.0\r\nHost: $host\r\n";
    foreach ($headers as $name => $value) {
        $request .= "$name: $value\r\n";
    }
    if ($body !== '') {
        $request .= 'Content-Length: ' . strlen($body) . "\r\nContent-Type: application/json\r\n";
    }
    fwrite($socket, $request . "\r\n" . $body);
    $response = stream_get_contents($socket);
    fclose($socket);
    if (!is_string($response) || !str_contains($response, "\r\n\r\n")) {
        return [0, [], 'no response'];
    }
    [$head, $content] = explode("\r\n\r\n", $response, 2);
    $lines = explode("\r\n", $head);
    $status = (int) (explode(' ', $lines[0])[1] ?? 0);
    $parsed = [];
    foreach (array_slice($lines, 1) as $line) {
        $colon = strpos($line, ':');
        if ($colon !== false) {
            $parsed[strtolower(trim(substr($line, 0, $colon)))] = trim(substr($line, $colon + 1));
        }
    }

    return [$status, $parsed, $content];
}

/** The X-DW-Revision the page answers with now, or -1 on a failed request. */
function served_revision(string $url): int
{
    [$status, $headers] = http_request($url, 'GET', '/', ['CF-IPCountry' => 'DE']);

    return $status === 200 && isset($headers['x-dw-revision']) ? (int) $headers['x-dw-revision'] : -1;
}

/** A streaming watch on the routing prefix via etcd's JSON gateway (HTTP/1.0: no chunking). */
function watch_open(string $etcd): mixed
{
    [$host, $port] = host_port($etcd);
    $socket = @stream_socket_client("tcp://$host:$port", $errno, $error, 5);
    if ($socket === false) {
        fail("cannot connect to etcd at $etcd: $error");
    }
    $end = substr(PREFIX, 0, -1) . chr(ord(substr(PREFIX, -1)) + 1);
    $body = json_encode(['create_request' => ['key' => base64_encode(PREFIX), 'range_end' => base64_encode($end)]]);
    fwrite($socket, "POST /v3/watch HTTP/1.0\r\nHost: $host\r\nContent-Type: application/json\r\n"
        . 'Content-Length: ' . strlen($body) . "\r\n\r\n" . $body);
    stream_set_blocking($socket, false);

    return $socket;
}

/**
 * Reads what the watch has delivered so far; returns the revisions of responses that
 * carried events, with the time they were read.
 *
 * @return list<array{0: int, 1: int}>
 */
function watch_poll(mixed $socket, string &$buffer, bool &$inBody): array
{
    $chunk = fread($socket, 1 << 20);
    $now = hrtime(true);
    if (is_string($chunk)) {
        $buffer .= $chunk;
    }
    $seen = [];
    // Skip the HTTP head once, then one JSON object per line.
    if (!$inBody) {
        $at = strpos($buffer, "\r\n\r\n");
        if ($at === false) {
            return [];
        }
        $buffer = substr($buffer, $at + 4);
        $inBody = true;
    }
    while (($newline = strpos($buffer, "\n")) !== false) {
        $line = substr($buffer, 0, $newline);
        $buffer = substr($buffer, $newline + 1);
        $message = json_decode($line, true);
        $events = $message['result']['events'] ?? [];
        if ($events !== []) {
            $revision = 0;
            foreach ($events as $event) {
                $revision = max($revision, (int) ($event['kv']['mod_revision'] ?? 0));
            }
            $seen[] = [$revision, $now];
        }
    }

    return $seen;
}

function percentile(array $sorted, float $p): float
{
    if ($sorted === []) {
        return NAN;
    }
    $rank = (int) ceil($p / 100 * count($sorted)) - 1;

    return (float) $sorted[max(0, min(count($sorted) - 1, $rank))];
}

function mode_command(string $etcd, string $url, array $command): void
{
    $watch = watch_open($etcd);
    $buffer = '';
    // The watch is confirmed by its first (created) message before anything changes.
    $deadline = hrtime(true) + 10_000_000_000;
    while (!str_contains($buffer, '"created":true')) {
        $chunk = fread($watch, 65536);
        if (is_string($chunk)) {
            $buffer .= $chunk;
        }
        if (hrtime(true) > $deadline) {
            fail('etcd did not confirm the watch within 10 s');
        }
        usleep(1000);
    }
    $buffer = substr($buffer, strpos($buffer, "\r\n\r\n") + 4);
    $buffer = substr($buffer, (int) strpos($buffer, "\n") + 1);
    $inBody = true;

    $descriptors = [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']];
    $process = proc_open($command, $descriptors, $pipes);
    if (!is_resource($process)) {
        fail('cannot run ' . implode(' ', $command));
    }
    stream_set_blocking($pipes[1], false);
    stream_set_blocking($pipes[2], false);
    $output = '';
    $exit = null;
    $committed = null; // [revision, time]
    $visible = null;
    $polls = 0;
    $deadline = hrtime(true) + 30_000_000_000;
    while (true) {
        $output .= (string) stream_get_contents($pipes[1]) . (string) stream_get_contents($pipes[2]);
        if ($exit === null) {
            $status = proc_get_status($process);
            if (!$status['running']) {
                $exit = $status['exitcode'];
            }
        }
        foreach (watch_poll($watch, $buffer, $inBody) as $change) {
            $committed ??= $change;
        }
        if ($committed !== null) {
            $revision = served_revision($url);
            $polls++;
            if ($revision >= $committed[0]) {
                $visible ??= hrtime(true);
            }
        } else {
            usleep(200);
        }
        if ($visible !== null && $exit !== null) {
            break;
        }
        if ($exit !== null && $exit !== 0) {
            break;
        }
        if (hrtime(true) > $deadline) {
            break;
        }
    }
    $output .= (string) stream_get_contents($pipes[1]) . (string) stream_get_contents($pipes[2]);
    proc_close($process);
    fclose($watch);
    echo json_encode([
        'exit' => $exit,
        'output' => $output,
        'revision' => $committed[0] ?? null,
        'latency_ms' => $committed !== null && $visible !== null ? ($visible - $committed[1]) / 1e6 : null,
        'polls' => $polls,
    ], JSON_UNESCAPED_SLASHES), "\n";
}

function etcd_put(string $etcd, string $key, string $value): int
{
    $body = json_encode(['key' => base64_encode($key), 'value' => base64_encode($value)]);
    [$status, , $content] = http_request($etcd, 'POST', '/v3/kv/put', [], $body);
    $reply = json_decode($content, true);
    if ($status !== 200 || !isset($reply['header']['revision'])) {
        fail("put $key: HTTP $status $content");
    }

    return (int) $reply['header']['revision'];
}

function mode_series(string $etcd, string $url, int $changes, string $key, int $gapMs): void
{
    $latencies = [];
    $timeouts = 0;
    for ($i = 0; $i < $changes; $i++) {
        // Two valid values of one region, alternating; every put is a change.
        $a = 50 + ($i % 2) * 10;
        $value = json_encode(['shard' => 'eu-1', 'origins' => ['fra-a', 'fra-b'],
            'weight' => ['fra-a' => $a, 'fra-b' => 100 - $a], 'updated' => gmdate('Y-m-d\TH:i:s\Z')]);
        $revision = etcd_put($etcd, PREFIX . $key, $value);
        $committed = hrtime(true);
        $deadline = $committed + 5_000_000_000;
        while (served_revision($url) < $revision) {
            if (hrtime(true) > $deadline) {
                $timeouts++;
                continue 2;
            }
        }
        $latencies[] = hrtime(true) - $committed;
        usleep($gapMs * 1000);
    }
    $sorted = $latencies;
    sort($sorted);
    echo json_encode([
        'changes' => $changes,
        'measured' => count($latencies),
        'timeouts' => $timeouts,
        'p50_ms' => percentile($sorted, 50) / 1e6,
        'p90_ms' => percentile($sorted, 90) / 1e6,
        'p99_ms' => percentile($sorted, 99) / 1e6,
        'max_ms' => ($sorted === [] ? NAN : end($sorted)) / 1e6,
        'latencies_ns' => $latencies,
    ]), "\n";
}

function mode_seed(string $etcd, string $snapshot): void
{
    $parsed = json_decode((string) file_get_contents($snapshot), true);
    is_array($parsed['kvs'] ?? null) || fail("$snapshot is not a snapshot");
    $revision = 0;
    foreach (array_chunk($parsed['kvs'], 1000, true) as $chunk) {
        $puts = [];
        foreach ($chunk as $key => $value) {
            $puts[] = ['requestPut' => ['key' => base64_encode((string) $key), 'value' => base64_encode($value)]];
        }
        [$status, , $content] = http_request($etcd, 'POST', '/v3/kv/txn', [], json_encode(['success' => $puts]));
        $reply = json_decode($content, true);
        ($status === 200 && isset($reply['header']['revision'])) || fail("txn: HTTP $status " . substr($content, 0, 200));
        $revision = (int) $reply['header']['revision'];
    }
    echo $revision, "\n";
}

$args = array_slice($argv, 1);
if (($args[0] ?? '') === 'seed') {
    mode_seed($args[1] ?? fail('seed ETCD SNAPSHOT'), $args[2] ?? fail('seed ETCD SNAPSHOT'));
    exit(0);
}
$mode = array_shift($args);
$etcd = array_shift($args) ?? fail('usage: see the header of this file');
$url = array_shift($args) ?? fail('usage: see the header of this file');
if ($mode === 'command') {
    if (($args[0] ?? '') === '--') {
        array_shift($args);
    }
    $args !== [] || fail('command: nothing to run');
    mode_command($etcd, $url, $args);
} elseif ($mode === 'series') {
    $options = ['--changes' => '200', '--key' => 'region/DE', '--gap-ms' => '20'];
    for ($i = 0; $i < count($args); $i += 2) {
        array_key_exists($args[$i], $options) || fail("unknown option {$args[$i]}");
        $options[$args[$i]] = $args[$i + 1] ?? fail("{$args[$i]} needs a value");
    }
    mode_series($etcd, $url, (int) $options['--changes'], $options['--key'], (int) $options['--gap-ms']);
} else {
    fail('usage: propagation.php command|series ETCD URL ...');
}
