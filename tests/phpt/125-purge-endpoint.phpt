--TEST--
php/purge.php: 405 for GET, 403 without or with a wrong token (the SHA-256 of the token's bytes included) and for an untrusted sha file (symlink, other owner, writable, a parent others can write), 400 for every malformed line, 413 at the body and header limits (200 just under), the tags of each line kind
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
require __DIR__ . '/../../php/PurgeEndpoint.php';
use DwRouter\PurgeEndpoint;

$dir = dw_test_dir(__FILE__);
$snapshot = "$dir/routing.json";
$sha = "$snapshot.purge-sha256";
$token = bin2hex(random_bytes(32));
$shaText = hash('sha256', $token) . "\n";
dw_plant($sha, $shaText, 0);

$call = function (string $body, ?string $auth = 'right', string $method = 'POST', array $extra = []) use ($snapshot, $token): string {
    $server = ['REQUEST_METHOD' => $method, 'DW_SNAPSHOT_PATH' => $snapshot] + $extra;
    if ($auth !== null) {
        $server['HTTP_AUTHORIZATION'] = $auth === 'right' ? "Bearer $token" : $auth;
    }
    $read = 0;
    [$status, $headers, $text] = PurgeEndpoint::handle($server, function (int $max) use ($body, &$read) {
        $read++;
        return substr($body, 0, $max);
    });
    $purge = $headers['X-LiteSpeed-Purge'] ?? null;
    return $status . ($purge === null ? '' : " $purge") . ($status === 403 && $read > 0 ? ' (BODY READ)' : '') . ' | '
        . str_replace(dirname($snapshot, 2), 'BASE', trim($text));
};

echo "-- method and secret\n";
echo $call('all', 'right', 'GET'), "\n";
echo $call('all', null), "\n";
echo $call('all', 'Bearer ' . str_repeat('0', 64)), "\n";
echo $call('all', 'Bearer ' . strtoupper($token)), "\n";
echo $call('all', "Bearer $token "), "\n";
echo $call('all', 'Basic ' . base64_encode("x:$token")), "\n";
echo $call('all'), "\n";
// Only the SHA-256 of the token's 64 hex characters (what dw-agent writes), not that of
// the 32 bytes it spells.
dw_plant($sha, hash('sha256', hex2bin($token)) . "\n", 0);
echo 'raw-bytes sha: ', $call('all'), "\n";
dw_plant($sha, $shaText, 0);

echo "-- the sha file must be trusted\n";
dw_plant("$dir/elsewhere", $shaText, 0);
unlink($sha);
echo 'missing: ', $call('all'), "\n";
symlink("$dir/elsewhere", $sha);
echo 'symlink: ', $call('all'), "\n";
unlink($sha);
dw_plant($sha, $shaText, 65534);
echo 'other owner: ', $call('all'), "\n";
echo 'other owner, trusted: ', $call('all', 'right', 'POST', ['DW_TRUSTED_OWNER' => '65534']), "\n";
dw_plant($sha, $shaText, 0, 0666);
echo 'writable by others: ', $call('all'), "\n";
dw_plant($sha, $shaText, 0, 0620);
echo 'writable by group: ', $call('all'), "\n";
dw_plant($sha, strtoupper($shaText), 0);
echo 'malformed: ', $call('all'), "\n";
dw_plant($sha, rtrim($shaText), 0);
echo 'no newline: ', $call('all'), "\n";
dw_plant($sha, $shaText . "\n", 0);
echo 'over 65 bytes: ', $call('all'), "\n";
dw_plant($sha, $shaText, 0);
// Rule 5 (tests/phpt/131 has the rest): the test's base directory, above the sha file's.
chmod(dirname($dir), 0777);
echo 'a parent writable by others: ', $call('all'), "\n";
chmod(dirname($dir), 0755);
echo 'fixed: ', $call('all'), "\n";

echo "-- each line kind\n";
foreach (['region/DE', 'region/continent/EU', 'region/US-CA', 'region/x%2Cy%FF', 'policy/global:pick',
    'policy/global:chain', 'policy/global:continent_of', 'policy/global:buckets', 'all', "all\n", "region/DE\nregion/FR\nall\n"] as $body) {
    echo json_encode($body), ': ', $call($body), "\n";
}
$key123 = str_repeat('k', 123);
echo 'key of 123 bytes: ', str_replace($key123, 'K123', $call("region/$key123")), "\n";
echo 'key of 124 bytes: ', $call('region/' . str_repeat('k', 124)), "\n";
echo 'key of 384 bytes: ', $call('region/' . str_repeat('%2C', 128)), "\n";

echo "-- malformed lines\n";
foreach (['', "\n", 'region/', 'region/a b', 'region/%2c', 'region/%2', 'region/%', 'Region/DE', 'policy/global',
    'policy/global:default', "region/DE\n\nall", "all\r", "all\n\n", ' all', "region/DE\x00", 'region/é',
    'region/' . str_repeat('k', 385), "all\nnope"] as $body) {
    echo json_encode($body), ': ', $call($body), "\n";
}

echo "-- limits\n";
echo '1000 lines: ', $call(str_repeat("all\n", 999) . 'all'), "\n";
echo '1001 lines: ', $call(str_repeat("all\n", 1000) . 'all'), "\n";
// 167 lines of the longest key (one tag: dw:long) and one more line: 65536 bytes.
$big = implode("\n", array_fill(0, 167, 'region/' . str_repeat('k', 384))) . "\nregion/" . str_repeat('k', 65);
echo 'body bytes: ', strlen($big), ' ', $call($big), "\n";
echo 'body bytes: ', strlen($big . 'k'), ' ', $call($big . 'k'), "\n";
echo 'Content-Length over: ', $call('all', 'right', 'POST', ['CONTENT_LENGTH' => '65537']), "\n";
// The X-LiteSpeed-Purge value at 8000 bytes exactly, then 8002.
$header = fn (string $body) => strlen(DwRouter\CacheTags::purgeHeader(DwRouter\CacheTags::ofPurgeBody($body)));
$keys = [];
for ($i = 0; $i === 0 || $header(implode("\n", $keys)) < 7700; $i++) {
    $keys[] = sprintf('region/%04d%s', $i, str_repeat('p', 90));
}
// One more region line adds `, tag=dw:r:K, tag=dw:m:K`: 22 + 2 * len(K) bytes; the
// continent_of line adds `, tag=dw:cont`, 13, to make the gap even.
if ((8000 - $header(implode("\n", $keys)) - 22) % 2 === 1) {
    $keys[] = 'policy/global:continent_of';
}
$body = implode("\n", $keys);
$last = str_repeat('q', intdiv(8000 - $header($body) - 22, 2));
echo 'header bytes: ', $header("$body\nregion/$last"), "\n";
echo 'header at 8000: ', substr($call("$body\nregion/$last"), 0, 3), "\n";
echo 'header at 8002: ', $call("$body\nregion/{$last}q"), "\n";

echo "-- purge.php itself, in a process without the extension\n";
$run = function (array $server) {
    $code = 'foreach (json_decode($argv[1], true) as $k => $v) { $_SERVER[$k] = $v; }'
        . ' include ' . var_export(dirname(__DIR__, 2) . '/php/purge.php', true) . ';'
        . ' echo "\n", http_response_code(), " ", extension_loaded("dw_router") ? "ext" : "no-ext", "\n";';
    $out = shell_exec(escapeshellarg(PHP_BINARY) . ' -n -r ' . escapeshellarg($code) . ' ' . escapeshellarg(json_encode($server)));
    return str_replace("\n", ' | ', trim((string) $out));
};
echo $run(['REQUEST_METHOD' => 'GET']), "\n";
echo $run(['REQUEST_METHOD' => 'POST', 'DW_SNAPSHOT_PATH' => $snapshot]), "\n";
echo $run(['REQUEST_METHOD' => 'POST', 'DW_SNAPSHOT_PATH' => $snapshot, 'HTTP_AUTHORIZATION' => "Bearer $token"]), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
-- method and secret
405 | only POST
403 | forbidden: no bearer token
403 | forbidden: wrong token
403 | forbidden: no bearer token
403 | forbidden: no bearer token
403 | forbidden: no bearer token
200 tag=dw | purged 1 tags
raw-bytes sha: 403 | forbidden: wrong token
-- the sha file must be trusted
missing: 403 | forbidden: no secret file
symlink: 403 | forbidden: secret file refused: a symbolic link (not followed)
other owner: 403 | forbidden: secret file refused: owned by uid 65534, not root or the directory's owner 0
other owner, trusted: 200 tag=dw | purged 1 tags
writable by others: 403 | forbidden: secret file refused: writable by group or others (mode 0666)
writable by group: 403 | forbidden: secret file refused: writable by group or others (mode 0620)
malformed: 403 | forbidden: secret file malformed
no newline: 403 | forbidden: secret file malformed
over 65 bytes: 403 | forbidden: secret file refused: over 65 bytes
a parent writable by others: 403 | forbidden: secret file refused: BASE on the way to it is writable by group or others (mode 0777)
fixed: 200 tag=dw | purged 1 tags
-- each line kind
"region\/DE": 200 tag=dw:r:DE, tag=dw:m:DE, tag=dw:long | purged 3 tags
"region\/continent\/EU": 200 tag=dw:r:continent/EU, tag=dw:m:continent/EU, tag=dw:long | purged 3 tags
"region\/US-CA": 200 tag=dw:r:US-CA, tag=dw:m:US-CA, tag=dw:long | purged 3 tags
"region\/x%2Cy%FF": 200 tag=dw:r:x%2Cy%FF, tag=dw:m:x%2Cy%FF, tag=dw:long | purged 3 tags
"policy\/global:pick": 200 tag=dw | purged 1 tags
"policy\/global:chain": 200 tag=dw:chain | purged 1 tags
"policy\/global:continent_of": 200 tag=dw:cont | purged 1 tags
"policy\/global:buckets": 200 tag=dw:b | purged 1 tags
"all": 200 tag=dw | purged 1 tags
"all\n": 200 tag=dw | purged 1 tags
"region\/DE\nregion\/FR\nall\n": 200 tag=dw:r:DE, tag=dw:m:DE, tag=dw:long, tag=dw:r:FR, tag=dw:m:FR, tag=dw | purged 6 tags
key of 123 bytes: 200 tag=dw:r:K123, tag=dw:m:K123, tag=dw:long | purged 3 tags
key of 124 bytes: 200 tag=dw:long | purged 1 tags
key of 384 bytes: 200 tag=dw:long | purged 1 tags
-- malformed lines
"": 400 | refused: malformed purge line (or no line)
"\n": 400 | refused: malformed purge line (or no line)
"region\/": 400 | refused: malformed purge line (or no line)
"region\/a b": 400 | refused: malformed purge line (or no line)
"region\/%2c": 400 | refused: malformed purge line (or no line)
"region\/%2": 400 | refused: malformed purge line (or no line)
"region\/%": 400 | refused: malformed purge line (or no line)
"Region\/DE": 400 | refused: malformed purge line (or no line)
"policy\/global": 400 | refused: malformed purge line (or no line)
"policy\/global:default": 400 | refused: malformed purge line (or no line)
"region\/DE\n\nall": 400 | refused: malformed purge line (or no line)
"all\r": 400 | refused: malformed purge line (or no line)
"all\n\n": 400 | refused: malformed purge line (or no line)
" all": 400 | refused: malformed purge line (or no line)
"region\/DE\u0000": 400 | refused: malformed purge line (or no line)
"region\/\u00e9": 400 | refused: malformed purge line (or no line)
"region\/kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk": 400 | refused: malformed purge line (or no line)
"all\nnope": 400 | refused: malformed purge line (or no line)
-- limits
1000 lines: 200 tag=dw | purged 1 tags
1001 lines: 413 | refused: over the limits (1000 lines, 64 KiB, 8000-byte header)
body bytes: 65536 200 tag=dw:long, tag=dw:r:kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk, tag=dw:m:kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk | purged 3 tags
body bytes: 65537 413 | refused: over the limits (1000 lines, 64 KiB, 8000-byte header)
Content-Length over: 413 | body over 65536 bytes
header bytes: 8000
header at 8000: 200
header at 8002: 413 | refused: over the limits (1000 lines, 64 KiB, 8000-byte header)
-- purge.php itself, in a process without the extension
only POST |  | 405 no-ext
forbidden: no bearer token |  | 403 no-ext
refused: malformed purge line (or no line) |  | 400 no-ext
