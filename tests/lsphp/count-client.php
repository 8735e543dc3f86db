<?php
/*
 * The client of tests/lsphp/run's `count` test: `php count-client.php URL N PARALLEL`.
 * Sends exactly N requests (PARALLEL at a time, curl_multi) over known geos, a quarter of
 * them with a sticky key, and prints as JSON what came back: requests answered 200 with a
 * routing header, per "geo origin sticky", and the others (a child killed mid-request).
 */
[$script, $url, $n, $parallel] = $argv;
$n = (int) $n;
$geos = ['DE', 'FR', 'US', 'GB', 'JP', 'BR', 'IN'];
mt_srand(29);
$multi = curl_multi_init();
$sent = 0;
$ok = [];
$okTotal = 0;
$failed = 0;
$start = function () use (&$sent, $multi, $url, $geos): void {
    $geo = $geos[mt_rand(0, count($geos) - 1)];
    $sticky = mt_rand(0, 3) === 0 ? 'user-' . mt_rand(1, 100) : null;
    $headers = ["CF-IPCountry: $geo"];
    if ($sticky !== null) {
        $headers[] = "X-DW-Sticky: $sticky";
    }
    $curl = curl_init("$url/");
    curl_setopt_array($curl, [CURLOPT_HTTPHEADER => $headers, CURLOPT_RETURNTRANSFER => true,
        CURLOPT_HEADER => true, CURLOPT_TIMEOUT => 20, CURLOPT_PRIVATE => $geo . ' ' . ($sticky === null ? 'false' : 'true')]);
    curl_multi_add_handle($multi, $curl);
    $sent++;
};
for ($i = 0; $i < min($parallel, $n); $i++) {
    $start();
}
do {
    curl_multi_exec($multi, $running);
    curl_multi_select($multi, 0.5);
    while ($done = curl_multi_info_read($multi)) {
        $curl = $done['handle'];
        [$geo, $sticky] = explode(' ', curl_getinfo($curl, CURLINFO_PRIVATE));
        $response = (string) curl_multi_getcontent($curl);
        if (curl_getinfo($curl, CURLINFO_RESPONSE_CODE) === 200 && preg_match('/^x-dw-origin: (\S+)/mi', $response, $m)) {
            $key = "$geo $m[1] $sticky";
            $ok[$key] = ($ok[$key] ?? 0) + 1;
            $okTotal++;
        } else {
            $failed++;
        }
        curl_multi_remove_handle($multi, $curl);
        if ($sent < $n) {
            $start();
        }
    }
} while ($running > 0 || $sent < $n && curl_multi_exec($multi, $running) === CURLM_OK);
ksort($ok);
echo json_encode(['sent' => $sent, 'ok' => $okTotal, 'failed' => $failed, 'by' => $ok]), "\n";
