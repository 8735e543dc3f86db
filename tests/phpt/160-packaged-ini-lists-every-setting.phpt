--TEST--
The packaged ini files (Debian's and lsphp's) list every dw_router.* setting the extension registers, with its default
--EXTENSIONS--
dw_router
--FILE--
<?php
// The extension's side: every registered dw_router.* entry and its default (this run sets
// none of them: run-tests passes no dw_router.* -d).
$registered = [];
foreach (ini_get_all('dw_router') as $name => $entry) {
    $registered[$name] = $entry['global_value'];
}
ksort($registered);

foreach (['dw_router.ini', 'lsphp-20-dw_router.ini'] as $file) {
    // The packaged file's side: its commented-out `;dw_router.NAME = DEFAULT` lines.
    $listed = [];
    foreach (file(dirname(__DIR__, 2) . '/packaging/deb/' . $file, FILE_IGNORE_NEW_LINES) as $line) {
        if (preg_match('/^;(dw_router\.[a-z_]+) =(?: (.*))?$/', $line, $m) === 1) {
            $listed[$m[1]] = $m[2] ?? '';
        }
    }
    ksort($listed);
    echo $file, ': ', count($listed), ' listed, ', count($registered), " registered\n";
    var_dump(array_diff_key($registered, $listed), array_diff_key($listed, $registered),
        array_diff_assoc($listed, $registered));
}
?>
--EXPECT--
dw_router.ini: 10 listed, 10 registered
array(0) {
}
array(0) {
}
array(0) {
}
lsphp-20-dw_router.ini: 10 listed, 10 registered
array(0) {
}
array(0) {
}
array(0) {
}
