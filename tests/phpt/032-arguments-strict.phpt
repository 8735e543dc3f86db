--TEST--
resolve() arguments with strict_types=1 behave like any internal string / ?string parameter
--EXTENSIONS--
dw_router
--FILE--
<?php
declare(strict_types=1);
require __DIR__ . '/fixtures/helpers.inc';
require __DIR__ . '/fixtures/arguments.inc';
$dir = dw_test_dir(__FILE__);

// Every string an accepted value coerces to (by PHP's own rules) gets a region.
$countries = [];
foreach (dw_argument_values() as $value) {
    $reference = dw_reference_country(fn ($v) => bin2hex($v), $value);
    if (isset($reference['value']) && $reference['value'] !== '') {
        $countries[] = $reference['value'];
    }
}
dw_argument_snapshot("$dir/s.json", $countries);
$router = new RegionRouter("$dir/s.json");

dw_check_arguments(
    $router,
    fn (...$args) => $router->resolve(...$args),
    fn ($v) => bin2hex($v),
    fn ($v) => number_format(1.5, 1, $v),
);
?>
--CLEAN--
<?php
declare(strict_types=1);
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
ok   country string
ok   stickyKey string
ok   country int 42
ok   stickyKey int 42
ok   country int -7
ok   stickyKey int -7
ok   country int max
ok   stickyKey int max
ok   country float 4.5
ok   stickyKey float 4.5
ok   country float 0.1+0.2
ok   stickyKey float 0.1+0.2
ok   country float 1/3
ok   stickyKey float 1/3
ok   country float 1e15
ok   stickyKey float 1e15
ok   country float 1e100
ok   stickyKey float 1e100
ok   country float -0.0
ok   stickyKey float -0.0
ok   country float 1e-7
ok   stickyKey float 1e-7
ok   country float NAN
ok   stickyKey float NAN
ok   country float INF
ok   stickyKey float INF
ok   country float -INF
ok   stickyKey float -INF
ok   country true
ok   stickyKey true
ok   country false
ok   stickyKey false
ok   country null
ok   stickyKey null
ok   country array
ok   stickyKey array
ok   country empty array
ok   stickyKey empty array
ok   country stdClass
ok   stickyKey stdClass
ok   country Stringable
ok   stickyKey Stringable
ok   country Closure
ok   stickyKey Closure
ok   country resource
ok   stickyKey resource
