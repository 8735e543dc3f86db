--TEST--
Route arrays are copy-on-write: a script may modify what resolve() returned without affecting later answers
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/cow.inc';
dw_cow_checks(dw_test_dir(__FILE__));
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
ok   write, add, unset, append
ok   the written copy
ok   foreach by reference
ok   reference into the array
ok   array_walk + sort
ok   internal pointer
ok   fail-open route written
ok   nested write
ok   captured by value
ok   === literal
ok   == reordered literal
ok   serialize round trip
ok   json
ok   var_export
ok   array functions
ok   array_merge / +
ok   extract
ok   destructuring
ok   string keys are usable as keys
ok   (object) cast
ok   ArrayObject
ok   held routes after reload
ok   new answer
ok   strings outlive routes
