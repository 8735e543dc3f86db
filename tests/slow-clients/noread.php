<?php

declare(strict_types=1);

/*
 * tests/slow-clients/run: clients that ask and never read (run as uid 65534). Keeps N
 * connections open to HOST:PORT, each sending a whole `GET /metrics` request at once and
 * never reading a byte of the answer; each is closed and opened again every HOLD seconds.
 * Runs for SECONDS. Prints "opened N" (connections opened in all) at the end.
 *
 *   php noread.php HOST PORT N HOLD SECONDS [FROM]
 * FROM: the local address to connect from (default: the kernel's choice).
 */

[, $host, $port, $n, $hold, $seconds, $from] = $argv + [6 => null];
$context = stream_context_create($from === null ? [] : ['socket' => ['bindto' => "$from:0"]]);
$n = (int) $n;
$hold = (float) $hold;
$end = microtime(true) + (int) $seconds;
$open = static function () use ($host, $port, $context) {
    $s = @stream_socket_client("tcp://$host:$port", $errno, $error, 1, STREAM_CLIENT_CONNECT, $context);
    if ($s !== false) {
        @fwrite($s, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    return $s;
};
$sockets = [];
$opened_at = [];
$opened = 0;
for ($i = 0; $i < $n && microtime(true) < $end; $i++) {
    $sockets[$i] = $open();
    $opened_at[$i] = microtime(true);
    $opened++;
}
while (microtime(true) < $end) {
    foreach ($sockets as $i => $s) {
        if (microtime(true) - $opened_at[$i] >= $hold) {
            if ($s !== false) {
                @fclose($s);
            }
            $sockets[$i] = $open();
            $opened_at[$i] = microtime(true);
            $opened++;
        }
    }
    usleep(50000);
}
echo "opened $opened\n";
