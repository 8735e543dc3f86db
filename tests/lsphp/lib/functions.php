<?php

declare(strict_types=1);

/*
 * tests/lsphp/lib/endpoints.sh: the global functions the scripts in php/ call, from their
 * tokens (run by the CLI, which has ext/tokenizer; the minimal lsphp has not):
 *
 *   php functions.php FILE...   prints one line per function: NAME required|optional
 *
 * A call is a name followed by `(` that is not a method (`->`, `?->`, `::`), a
 * declaration (`function`), `new`, or a language construct. "optional" when the file also
 * tests `function_exists('NAME')`, or of a function of the same prefix (`apcu_fetch` where
 * `apcu_enabled` is tested), and works without it. Functions php/ declares itself are left out (it declares none at the top level).
 * The guards are gathered over every file given: the userland twin tests APCu once
 * (RegionRouter.php) and hands the answer to its parts (SnapshotCache.php,
 * AnswerCounter.php), which call APCu only when told it is there.
 */

$guarded = [];
foreach (array_slice($argv, 1) as $file) {
    preg_match_all('/function_exists\(\s*\'\\\\?([A-Za-z_][A-Za-z0-9_]*)\'/', (string) file_get_contents($file), $m);
    $guarded = array_merge($guarded, $m[1]);
}

$names = [];
foreach (array_slice($argv, 1) as $file) {
    $src = (string) file_get_contents($file);
    $tokens = array_values(array_filter(token_get_all($src),
        static fn ($t) => !is_array($t) || !in_array($t[0], [T_WHITESPACE, T_COMMENT, T_DOC_COMMENT], true)));
    foreach ($tokens as $i => $t) {
        if (!is_array($t) || !in_array($t[0], [T_STRING, T_NAME_FULLY_QUALIFIED], true)) {
            continue;
        }
        if (($tokens[$i + 1] ?? null) !== '(') {
            continue;
        }
        $prev = $tokens[$i - 1] ?? null;
        if (is_array($prev) && in_array($prev[0], [T_OBJECT_OPERATOR, T_NULLSAFE_OBJECT_OPERATOR, T_DOUBLE_COLON, T_FUNCTION, T_NEW], true)) {
            continue;
        }
        $name = strtolower(ltrim($t[1], '\\'));
        if (str_contains($name, '\\')) {
            continue; // a namespaced function of php/ itself (none today)
        }
        // guarded itself, or of the guarded function's extension (apcu_fetch after apcu_enabled)
        $prefix = strstr($name, '_', true);
        $optional = false;
        foreach ($guarded as $g) {
            $g = strtolower($g);
            $optional = $optional || $g === $name || ($prefix !== false && str_starts_with($g, "{$prefix}_"));
        }
        $names[$name] = ($names[$name] ?? 'optional') === 'required' || !$optional ? 'required' : 'optional';
    }
}
ksort($names);
foreach ($names as $name => $kind) {
    echo "$name $kind\n";
}
