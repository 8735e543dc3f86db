<?php

declare(strict_types=1);

/*
 * The phpt pieces for running a test inside lsphp (tests/lsphp/run, "phpt under lsphp"):
 *
 *   php phpt.php split TEST.phpt OUT_BASE     writes OUT_BASE.php (the --FILE-- section),
 *                                             OUT_BASE.clean.php (--CLEAN--, may be empty),
 *                                             OUT_BASE.ini (--INI-- lines) and prints
 *                                             "ok" or "skip: why"
 *   php phpt.php check TEST.phpt OUTPUT_FILE  exit 0 when OUTPUT_FILE matches --EXPECT-- or
 *                                             --EXPECTF-- (as run-tests.php compares:
 *                                             trailing whitespace trimmed); else a diff
 *
 * The generated files live beside the test, so the test's __DIR__ and __FILE__-based
 * fixtures (fixtures/helpers.inc, dw_test_dir()) work unchanged.
 */

function sections(string $path): array
{
    $sections = [];
    $name = null;
    foreach (preg_split('/(?<=\n)/', (string) file_get_contents($path)) as $line) {
        if (preg_match('/^--([A-Z_]+)--\s*$/', $line, $m)) {
            $name = $m[1];
            $sections[$name] = '';
            continue;
        }
        if ($name !== null) {
            $sections[$name] .= $line;
        }
    }

    return $sections;
}

/** run-tests.php's --EXPECTF-- placeholders as a regular expression. */
function expectf_regex(string $expect): string
{
    $map = ['%e' => '\\/', '%s' => '[^\r\n]+', '%S' => '[^\r\n]*', '%a' => '.+', '%A' => '.*',
        '%w' => '\s*', '%i' => '[+-]?\d+', '%d' => '\d+', '%x' => '[0-9a-fA-F]+',
        '%f' => '[+-]?\.?\d+\.?\d*(?:[Ee][+-]?\d+)?', '%c' => '.', '%0' => '\x00'];
    $regex = '';
    foreach (preg_split('/(%[esSaAwidxfc0])/', $expect, -1, PREG_SPLIT_DELIM_CAPTURE) as $piece) {
        $regex .= $map[$piece] ?? preg_quote($piece, '/');
    }

    return '/^' . $regex . '$/s';
}

[, $command, $test, $target] = $argv + [null, null, null, null];
if (!is_string($command) || !is_string($test) || !is_string($target) || !is_file($test)) {
    fwrite(STDERR, "usage: php phpt.php split|check TEST.phpt OUT\n");
    exit(2);
}
$s = sections($test);
if ($command === 'split') {
    foreach (['STDIN', 'ARGS', 'ENV', 'POST', 'GET', 'COOKIE', 'PHPDBG', 'CAPTURE_STDIO'] as $unsupported) {
        if (isset($s[$unsupported])) {
            echo "skip: uses --$unsupported--\n";
            exit(0);
        }
    }
    if (!isset($s['FILE'])) {
        echo "skip: no --FILE--\n";
        exit(0);
    }
    file_put_contents("$target.php", $s['FILE']);
    file_put_contents("$target.clean.php", $s['CLEAN'] ?? '');
    // run-tests.php's substitutions in --INI--: {PWD} is the test's directory, {TMP} the
    // temporary one (the same /tmp for lsphp, started in the same environment).
    file_put_contents("$target.ini", strtr($s['INI'] ?? '', ['{PWD}' => dirname(realpath($test)), '{TMP}' => sys_get_temp_dir()]));
    echo "ok\n";
    exit(0);
}
if ($command === 'check') {
    $output = rtrim(str_replace("\r\n", "\n", (string) file_get_contents($target)));
    if (isset($s['EXPECT'])) {
        $ok = $output === rtrim(str_replace("\r\n", "\n", $s['EXPECT']));
    } elseif (isset($s['EXPECTF'])) {
        $ok = preg_match(expectf_regex(rtrim(str_replace("\r\n", "\n", $s['EXPECTF']))), $output) === 1;
    } else {
        echo "no --EXPECT-- or --EXPECTF--\n";
        exit(1);
    }
    if (!$ok) {
        $want = explode("\n", rtrim($s['EXPECT'] ?? $s['EXPECTF']));
        $got = explode("\n", $output);
        for ($i = 0, $shown = 0; $i < max(count($want), count($got)) && $shown < 8; $i++) {
            if (($want[$i] ?? null) !== ($got[$i] ?? null)) {
                printf("    line %d: want %s\n            got  %s\n", $i + 1, json_encode($want[$i] ?? null), json_encode($got[$i] ?? null));
                $shown++;
            }
        }
    }
    exit($ok ? 0 : 1);
}
fwrite(STDERR, "unknown command $command\n");
exit(2);
