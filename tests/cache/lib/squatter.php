<?php

declare(strict_types=1);

/*
 * tests/cache/lib/squatter.sh: a process that took the web server's port while it was down
 * (run as uid 65534 by the test). Accepts connections on 127.0.0.1:PORT, reads what each
 * sends for up to 1 s (or until a request head and its Content-Length body are in), answers
 * `200 OK` as a purge endpoint would, and appends one line per connection to LOG:
 * "conn BYTES" then the bytes received, hex-encoded (so the test can grep for the token).
 * It exits after 120 s. ADDRESS (default 127.0.0.1) is where it binds: an IPv4 address,
 * 0.0.0.0, or an IPv6 one in brackets ([::1], [::] dual-stack).
 *
 *   php squatter.php PORT LOG [ADDRESS]
 */

[, $port, $log] = $argv;
$address = $argv[3] ?? '127.0.0.1';
$context = stream_context_create(['socket' => ['ipv6_v6only' => false]]);
$server = stream_socket_server("tcp://$address:$port", $errno, $error, STREAM_SERVER_BIND | STREAM_SERVER_LISTEN, $context);
if ($server === false) {
    fwrite(STDOUT, "cannot bind $address:$port: $error\n");
    exit(1);
}
file_put_contents($log, "listening\n", FILE_APPEND);
$end = time() + 120; // never outlives a test run that was killed before it stopped it
while (time() < $end) {
    $client = @stream_socket_accept($server, 1);
    if ($client === false) {
        continue;
    }
    stream_set_timeout($client, 1);
    $got = '';
    $deadline = microtime(true) + 1.0;
    while (microtime(true) < $deadline) {
        $chunk = fread($client, 65536);
        if ($chunk === false || ($chunk === '' && feof($client))) {
            break;
        }
        $got .= $chunk;
        $head = strpos($got, "\r\n\r\n");
        if ($head !== false && preg_match('/content-length:\s*(\d+)/i', substr($got, 0, $head), $m)
            && strlen($got) >= $head + 4 + (int) $m[1]) {
            break;
        }
    }
    @fwrite($client, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    fclose($client);
    file_put_contents($log, 'conn ' . strlen($got) . ' ' . bin2hex($got) . "\n", FILE_APPEND);
}
