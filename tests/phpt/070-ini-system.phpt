--TEST--
ini: every dw_router.* setting is visible through ini_get()/ini_get_all() and is PHP_INI_SYSTEM (ini_set() refuses)
--EXTENSIONS--
dw_router
--FILE--
<?php
$defaults = [
    'dw_router.snapshot_path' => '/run/dw-router/routing.json',
    'dw_router.fallback_shard' => 'us-1',
    'dw_router.fallback_origin' => 'iad-a',
    'dw_router.poll_interval_ms' => '250',
    'dw_router.max_snapshot_bytes' => '67108864',
    'dw_router.trusted_owner' => '',
    'dw_router.preload' => 'auto',
    'dw_router.engine_shortcuts' => 'all',
    'dw_router.count_answers' => 'auto',
    'dw_router.answers_dir' => '/run/dw-router-answers',
];
$all = ini_get_all('dw_router');
$names = array_keys($all);
$want = array_keys($defaults);
sort($names);
sort($want);
var_dump($names === $want);
foreach ($defaults as $name => $value) {
    $entry = $all[$name];
    printf("%-30s get=%s global=%s local=%s access=%s\n", $name,
        json_encode(ini_get($name) === $value), json_encode($entry['global_value'] === $value),
        json_encode($entry['local_value'] === $value), $entry['access'] === INI_SYSTEM ? 'SYSTEM' : $entry['access']);
    // Refused at run time, and the value stays.
    $set = ini_set($name, 'changed');
    printf("%-30s ini_set=%s still=%s\n", $name, json_encode($set), json_encode(ini_get($name) === $value));
}
// ini_restore() and per-directory style changes do nothing either.
ini_restore('dw_router.fallback_shard');
var_dump(ini_get('dw_router.fallback_shard'));
// The default router reads the ini path.
$router = new RegionRouter();
var_dump($router->stats()['path']);
$explicit = new RegionRouter(null);
var_dump($explicit->stats()['path']);
?>
--EXPECT--
bool(true)
dw_router.snapshot_path        get=true global=true local=true access=SYSTEM
dw_router.snapshot_path        ini_set=false still=true
dw_router.fallback_shard       get=true global=true local=true access=SYSTEM
dw_router.fallback_shard       ini_set=false still=true
dw_router.fallback_origin      get=true global=true local=true access=SYSTEM
dw_router.fallback_origin      ini_set=false still=true
dw_router.poll_interval_ms     get=true global=true local=true access=SYSTEM
dw_router.poll_interval_ms     ini_set=false still=true
dw_router.max_snapshot_bytes   get=true global=true local=true access=SYSTEM
dw_router.max_snapshot_bytes   ini_set=false still=true
dw_router.trusted_owner        get=true global=true local=true access=SYSTEM
dw_router.trusted_owner        ini_set=false still=true
dw_router.preload              get=true global=true local=true access=SYSTEM
dw_router.preload              ini_set=false still=true
dw_router.engine_shortcuts     get=true global=true local=true access=SYSTEM
dw_router.engine_shortcuts     ini_set=false still=true
dw_router.count_answers        get=true global=true local=true access=SYSTEM
dw_router.count_answers        ini_set=false still=true
dw_router.answers_dir          get=true global=true local=true access=SYSTEM
dw_router.answers_dir          ini_set=false still=true
string(4) "us-1"
string(27) "/run/dw-router/routing.json"
string(27) "/run/dw-router/routing.json"
