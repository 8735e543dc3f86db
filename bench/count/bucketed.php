<?php
/*
 * The memory part's bucketed page (bench/13-count-load.sh): resolve() of the request's
 * CF-IPCountry with a visitor bucket drawn below buckets(), as a front controller with the
 * dw_bucket helper does for a new visitor; prints the route. Behind lsphp: the ini's
 * snapshot path.
 */
header('Content-Type: application/json');
$router = new RegionRouter();
$geo = is_string($_SERVER['HTTP_CF_IPCOUNTRY'] ?? null) ? $_SERVER['HTTP_CF_IPCOUNTRY'] : 'XX';
$n = $router->buckets();
$route = $router->resolve($geo, null, $n > 0 ? random_int(0, $n - 1) : null);
echo json_encode($route), "\n";
