<?php

/*
 * The HTTP client loop tests/lsphp/count-client.php and tests/traffic-ops/capacity-http.php
 * share: HTTP/1.0 requests over plain sockets (the devenv's CLI has no curl), a connection
 * each, so that every request is one the server answers on its own, whichever worker it
 * lands on. Each script decides what it sends and what an answer counts as.
 */

/**
 * Sends requests to `$address` (`tcp://host:port`), at most `$parallel` open at a time,
 * until `$more()` says there are none left and every open one has ended.
 *
 * `$next()` gives the next request as `[bytes, label]`, or null when none is due yet (a
 * paced sender): the loop then wakes within 1 ms to ask again. `$done(label, response,
 * error)` is called once per request: `response` is every byte read until the server
 * closed the connection, or null when the connection or the send failed (`error` says
 * why). A request whose connection stays silent for `$idleSeconds` (no byte on any open
 * connection, and nothing due) ends with what it has read so far.
 *
 * @param callable(): bool $more
 * @param callable(): (array{0: string, 1: string}|null) $next
 * @param callable(string, ?string, string): void $done
 */
function http_fan_out(string $address, int $parallel, callable $more, callable $next, callable $done, int $idleSeconds = 20): void
{
    $open = []; // id => [stream, label, buffer]
    $finish = function (int $id) use (&$open, $done): void {
        [$stream, $label, $buffer] = $open[$id];
        unset($open[$id]);
        fclose($stream);
        $done($label, $buffer, '');
    };
    while ($more() || $open !== []) {
        $paced = false;
        while ($more() && count($open) < $parallel) {
            $request = $next();
            if ($request === null) {
                $paced = true; // the next one is not due yet
                break;
            }
            [$bytes, $label] = $request;
            $stream = @stream_socket_client($address, $errno, $error, 20);
            if ($stream === false || fwrite($stream, $bytes) !== strlen($bytes)) {
                $done($label, null, "connect/send: $error");
                continue;
            }
            stream_set_blocking($stream, false);
            $open[(int) $stream] = [$stream, $label, ''];
        }
        $read = array_column($open, 0);
        if ($read === []) {
            if ($paced) {
                usleep(1000);
            }
            continue;
        }
        $write = $except = null;
        // Paced: wake within 1 ms to send the next one when it is due.
        if (stream_select($read, $write, $except, $paced ? 0 : $idleSeconds, $paced ? 1000 : 0) === 0) {
            if (!$paced) {
                foreach (array_keys($open) as $id) {
                    $finish($id); // nothing for $idleSeconds: ends with what it has
                }
            }
            continue;
        }
        foreach ($read as $stream) {
            $id = (int) $stream;
            $chunk = fread($stream, 65536);
            if ($chunk === false || $chunk === '') {
                if ($chunk === false || feof($stream)) {
                    $finish($id);
                }
                continue;
            }
            $open[$id][2] .= $chunk;
        }
    }
}
