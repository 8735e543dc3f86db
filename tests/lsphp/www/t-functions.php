<?php

declare(strict_types=1);
// tests/lsphp/lib/endpoints.sh: which of the functions in ?names= (comma-separated) this
// PHP lacks: one line "missing NAME" each, then "checked N".
$names = array_filter(explode(',', (string) ($_GET['names'] ?? '')), 'strlen');
foreach ($names as $name) {
    if (!function_exists($name)) {
        echo "missing $name\n";
    }
}
echo 'checked ', count($names), "\n";
