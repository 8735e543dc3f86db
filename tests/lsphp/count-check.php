<?php
/*
 * The check of tests/lsphp/run's `count` tests:
 * `php count-check.php BEFORE AFTER CLIENT KILLS [INFLIGHT]`.
 * BEFORE and AFTER are dw-agent's /metrics text before and after the run, CLIENT the
 * client's JSON. Per "geo origin sticky" (sticky: the answer's kind was sticky), the answers counted (after - before, summed over
 * step, key and shard) must equal the 200s the client saw; in all, the counted answers may
 * exceed them by at most one per child killed by SIGTERM (a request answered, then its
 * child killed before the response left) and never fall short.
 * INFLIGHT ("GEO:N"): one more request, for GEO (sent by nobody else), was held after
 * resolve() returned and its child killed by SIGTERM meanwhile; N is 1 if it was answered
 * 200 all the same (OpenLiteSpeed sent it again to another child), else 0. GEO's count
 * must then be exactly N + 1: the killed child's answer was counted (it is counted before
 * resolve() returns), and its response never left: the loss bound's edge, checked.
 * Prints what differs.
 */
[$script, $beforeFile, $afterFile, $clientFile, $kills] = $argv;
$inflight = $argv[5] ?? null;
function answers(string $text): array
{
    $by = [];
    preg_match_all('/^dw_router_answers_total\{([^}]*)\} (\d+)$/m', $text, $rows, PREG_SET_ORDER);
    foreach ($rows as [, $labels, $value]) {
        preg_match_all('/(\w+)="([^"]*)"/', $labels, $pairs, PREG_SET_ORDER);
        $l = [];
        foreach ($pairs as [, $k, $v]) {
            $l[$k] = $v;
        }
        // The client says whether it sent a sticky key (true/false); the counters say the
        // answer's kind (plain, sticky, bucket: counter layout 3).
        $sticky = match ($l['kind'] ?? '') {
            'sticky' => 'true',
            'plain' => 'false',
            default => 'kind=' . ($l['kind'] ?? '?'),
        };
        $key = "{$l['geo']} {$l['origin']} {$sticky}";
        $by[$key] = ($by[$key] ?? 0) + (int) $value;
    }
    return $by;
}
$before = answers((string) file_get_contents($beforeFile));
$after = answers((string) file_get_contents($afterFile));
$client = json_decode((string) file_get_contents($clientFile), true);
$counted = [];
foreach ($after as $key => $value) {
    $delta = $value - ($before[$key] ?? 0);
    if ($delta !== 0) {
        $counted[$key] = $delta;
    }
}
ksort($counted);
$inflightOk = true;
if ($inflight !== null) {
    [$inflightGeo, $inflightAnswered] = explode(':', $inflight);
    $inflightCounted = 0;
    foreach ($counted as $key => $value) {
        if (str_starts_with($key, "$inflightGeo ")) {
            $inflightCounted += $value;
            unset($counted[$key]);
        }
    }
    $inflightOk = $inflightCounted === (int) $inflightAnswered + 1;
}
$extra = array_sum($counted) - $client['ok'];
$bad = [];
foreach (array_unique(array_merge(array_keys($counted), array_keys($client['by']))) as $key) {
    $c = $counted[$key] ?? 0;
    $s = $client['by'][$key] ?? 0;
    if ($c < $s || $c > $s + (int) $kills) {
        $bad[] = "$key: counted $c, answered $s";
    }
}
printf("%d sent, %d answered 200, %d failed; %d counted (%+d, bound +%d); %d label sets\n",
    $client['sent'], $client['ok'], $client['failed'], array_sum($counted), $extra, $kills, count($counted));
if ($inflight !== null) {
    printf("in flight: a %s request held after resolve(), its child killed by SIGTERM: counted %d, answered %d (want answered + 1)\n",
        $inflightGeo, $inflightCounted, $inflightAnswered);
}
foreach ($bad as $line) {
    echo "  differs: $line\n";
}
exit($bad === [] && $inflightOk && $extra >= 0 && $extra <= (int) $kills && $client['ok'] + $client['failed'] === $client['sent'] ? 0 : 1);
