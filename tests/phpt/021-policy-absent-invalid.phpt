--TEST--
policy(): [] when absent, when not an object (counted invalid, defaults apply), {} when empty; policy JSON edge cases
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$regions = [
    'region/US' => dw_region('us-2', ['iad-b'], ['iad-b' => 1]),
    'region/GB' => dw_region('uk-1', ['lon-a'], ['lon-a' => 1]),
];
$cases = [
    'absent' => null,
    'empty object' => '{}',
    'array' => '["GB"]',
    'string' => '"GB"',
    'null' => 'null',
    'not JSON' => '{"default":"GB"',
    'empty value' => '',
    'duplicate keys' => '{"default":"US","x":1,"default":"GB"}',
    'pick unknown' => '{"default":"GB","pick":"Rendezvous"}',
];
$i = 0;
foreach ($cases as $name => $value) {
    $kvs = $regions;
    if ($value !== null) {
        $kvs['policy/global'] = $value;
    }
    $path = "$dir/p" . $i++ . '.json';
    dw_publish($path, $i, $kvs);
    $router = new RegionRouter($path);
    $stats = $router->stats();
    echo "$name: policy=", json_encode($router->policy()), ' invalid_keys=', $stats['invalid_keys'],
        ' XX=', $router->resolve('XX')['shard'], ' messages=', json_encode(array_values($stats['invalid'])), "\n";
    if ($stats['invalid_keys'] > 0) {
        var_dump(array_keys($stats['invalid']) === ['/dw/routing/policy/global']);
    }
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECTF--
absent: policy=[] invalid_keys=0 XX=us-2 messages=[]
empty object: policy=[] invalid_keys=0 XX=us-2 messages=[]
array: policy=[] invalid_keys=1 XX=us-2 messages=["policy: field `json`: %s"]
bool(true)
string: policy=[] invalid_keys=1 XX=us-2 messages=["policy: field `json`: %s"]
bool(true)
null: policy=[] invalid_keys=1 XX=us-2 messages=["policy: field `json`: %s"]
bool(true)
not JSON: policy=[] invalid_keys=1 XX=us-2 messages=["policy: field `json`: %s"]
bool(true)
empty value: policy=[] invalid_keys=1 XX=us-2 messages=["policy: field `json`: %s"]
bool(true)
duplicate keys: policy={"default":"GB","x":1} invalid_keys=0 XX=uk-1 messages=[]
pick unknown: policy={"default":"GB","pick":"Rendezvous"} invalid_keys=0 XX=uk-1 messages=[]
