--TEST--
php/StickyCookie.php: a page is cacheable only when the raw Cookie header names the dw_sticky PHP read, in exactly that spelling, once; the value and header limits at their edges
--FILE--
<?php
require __DIR__ . '/../../php/StickyCookie.php';
use DwRouter\StickyCookie;

// $_COOKIE as PHP would build it from the header (the CLI has no request: parse_str is not
// PHP's cookie parser, so the cookies are given as PHP's own rules make them).
$cases = [
    'no header' => [null, []],
    'another cookie' => ['a=1', ['a' => '1']],
    'exact' => ['dw_sticky=K1', ['dw_sticky' => 'K1']],
    'after another, no space' => ['a=1;dw_sticky=K1', ['a' => '1', 'dw_sticky' => 'K1']],
    'after another, a tab' => ["a=1;\tdw_sticky=K1", ['a' => '1', 'dw_sticky' => 'K1']],
    'dot (PHP rewrites it)' => ['dw.sticky=K1', ['dw_sticky' => 'K1']],
    'space' => ['dw sticky=K1', ['dw_sticky' => 'K1']],
    'open bracket' => ['dw[sticky=K1', ['dw_sticky' => 'K1']],
    'upper case' => ['DW_STICKY=K1', ['DW_STICKY' => 'K1']],
    'encoded name' => ['dw%5Fsticky=K1', ['dw%5Fsticky' => 'K1']],
    'encoded value' => ['dw_sticky=%4B1', ['dw_sticky' => 'K1']],
    'plus in value' => ['dw_sticky=K+1', ['dw_sticky' => 'K+1']],
    'duplicate' => ['dw_sticky=K1; dw_sticky=X', ['dw_sticky' => 'K1']],
    'dot then exact' => ['dw.sticky=K1; dw_sticky=X', ['dw_sticky' => 'K1']],
    'empty value' => ['dw_sticky=', ['dw_sticky' => '']],
    'in another cookie\'s value' => ['a=dw_sticky', ['a' => 'dw_sticky']],
    'PHP has it, the header not' => ['a=1', ['a' => '1', 'dw_sticky' => 'K1']],
    'an array' => ['dw_sticky[]=K1', ['dw_sticky' => ['K1']]],
    'header not a string' => [['x'], []],
    'value of 256 bytes' => ['dw_sticky=' . str_repeat('v', 256), ['dw_sticky' => str_repeat('v', 256)]],
    'value of 257 bytes' => ['dw_sticky=' . str_repeat('v', 257), ['dw_sticky' => str_repeat('v', 257)]],
    'header of 8192 bytes' => ['a=' . str_repeat('b', 8178) . ';dw_sticky=K', ['a' => str_repeat('b', 8178), 'dw_sticky' => 'K']],
    'header of 8193 bytes' => ['a=' . str_repeat('b', 8179) . ';dw_sticky=K', ['a' => str_repeat('b', 8179), 'dw_sticky' => 'K']],
];
foreach ($cases as $label => [$header, $cookies]) {
    $server = $header === null ? [] : ['HTTP_COOKIE' => $header];
    $r = StickyCookie::forCache($server, $cookies);
    $key = $r['key'] === null ? 'null' : (strlen($r['key']) > 16 ? strlen($r['key']) . ' bytes' : $r['key']);
    printf("%-28s key %-10s %s%s\n", $label, $key, $r['cacheable'] ? 'cacheable' : 'NOT cached',
        is_string($header) && strlen($header) > 1000 ? ' (' . strlen($header) . ' bytes)' : '');
}
?>
--EXPECT--
no header                    key null       cacheable
another cookie               key null       cacheable
exact                        key K1         cacheable
after another, no space      key K1         cacheable
after another, a tab         key K1         cacheable
dot (PHP rewrites it)        key K1         NOT cached
space                        key K1         NOT cached
open bracket                 key K1         NOT cached
upper case                   key null       NOT cached
encoded name                 key null       NOT cached
encoded value                key K1         NOT cached
plus in value                key K+1        NOT cached
duplicate                    key K1         NOT cached
dot then exact               key K1         NOT cached
empty value                  key null       NOT cached
in another cookie's value    key null       NOT cached
PHP has it, the header not   key K1         NOT cached
an array                     key null       NOT cached
header not a string          key null       NOT cached
value of 256 bytes           key 256 bytes  cacheable
value of 257 bytes           key 257 bytes  NOT cached
header of 8192 bytes         key K          cacheable (8192 bytes)
header of 8193 bytes         key K          NOT cached (8193 bytes)
