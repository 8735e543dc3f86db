<?php
// Writes the stub of the extension's API from Reflection, to stdout (make stubs).
declare(strict_types=1);

if (!extension_loaded('dw_router')) {
    fwrite(STDERR, "gen-stub: load the extension with -d extension=...\n");
    exit(2);
}
$class = new ReflectionClass('RegionRouter');
$out = "<?php\n\n/** @generate-class-entries */\n\n";
$out .= "/**\n * Routes a visitor's country to a catalog shard and an upstream origin, from the\n"
    . " * snapshot that dw-agent keeps current. Provided by the dw_router extension.\n */\n";
$out .= ($class->isFinal() ? 'final ' : '') . "class RegionRouter\n{\n";
$methods = $class->getMethods();
foreach ($methods as $i => $method) {
    $params = [];
    foreach ($method->getParameters() as $p) {
        $s = ($p->hasType() ? $p->getType() . ' ' : '') . '$' . $p->getName();
        if ($p->isOptional() && $p->isDefaultValueAvailable()) {
            $s .= ' = ' . var_export($p->getDefaultValue(), true);
        } elseif ($p->isOptional()) {
            $s .= ' = null';
        }
        $params[] = $s;
    }
    $return = $method->hasReturnType() ? ': ' . $method->getReturnType() : '';
    $doc = $method->getDocComment();
    if ($doc !== false) {
        $out .= '    ' . $doc . "\n";
    }
    $out .= sprintf("    public function %s(%s)%s {}\n", $method->getName(), implode(', ', $params), $return);
    if ($i < count($methods) - 1) {
        $out .= "\n";
    }
}
$out .= "}\n";
echo str_replace("NULL", "null", $out);
