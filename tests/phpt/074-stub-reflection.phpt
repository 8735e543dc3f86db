--TEST--
stubs/dw_router.stub.php agrees with the extension's Reflection (class flags, methods, parameters, types, defaults)
--EXTENSIONS--
dw_router
--SKIPIF--
<?php if (!function_exists('proc_open')) die('skip proc_open() disabled'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/signature.inc';
$stub = dirname(__DIR__, 2) . '/stubs/dw_router.stub.php';
var_dump(is_file($stub));

// The stub's side: a PHP without any ini (-n), so without the extension.
$proc = proc_open([PHP_BINARY, '-n', __DIR__ . '/fixtures/signature.inc', $stub], [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
$fromStub = stream_get_contents($pipes[1]);
$err = stream_get_contents($pipes[2]);
var_dump(proc_close($proc), $err);

$fromExtension = dw_signature('RegionRouter');
var_dump($fromStub === $fromExtension);
if ($fromStub !== $fromExtension) {
    echo "--- stub\n$fromStub--- extension\n$fromExtension";
}
// The agreed signature itself, so that a change to both sides is also seen here.
echo $fromExtension;
// And the class really comes from the extension here.
var_dump((new ReflectionClass('RegionRouter'))->getExtensionName(), (new ReflectionClass('RegionRouter'))->isInternal());
?>
--EXPECT--
bool(true)
int(0)
string(0) ""
bool(true)
class RegionRouter final=true abstract=false interface=false parent=null interfaces=[] constants=[] properties=[] instantiable=true
method __construct modifiers=[public] static=false byref=false return=- tentative=- params=1 required=0 variadic=false
  param #0 $snapshotPath type=?string nullable=true optional=true default=NULL byref=false variadic=false promoted=false
method answeredRevision modifiers=[public] static=false byref=false return=int tentative=- params=0 required=0 variadic=false
method buckets modifiers=[public] static=false byref=false return=int tentative=- params=0 required=0 variadic=false
method cacheTags modifiers=[public] static=false byref=false return=?array tentative=- params=3 required=1 variadic=false
  param #0 $geo type=string nullable=false optional=false default=- byref=false variadic=false promoted=false
  param #1 $stickyKey type=?string nullable=true optional=true default=NULL byref=false variadic=false promoted=false
  param #2 $bucket type=?int nullable=true optional=true default=NULL byref=false variadic=false promoted=false
method explain modifiers=[public] static=false byref=false return=array tentative=- params=3 required=1 variadic=false
  param #0 $geo type=string nullable=false optional=false default=- byref=false variadic=false promoted=false
  param #1 $stickyKey type=?string nullable=true optional=true default=NULL byref=false variadic=false promoted=false
  param #2 $bucket type=?int nullable=true optional=true default=NULL byref=false variadic=false promoted=false
method policy modifiers=[public] static=false byref=false return=array tentative=- params=0 required=0 variadic=false
method reload modifiers=[public] static=false byref=false return=bool tentative=- params=0 required=0 variadic=false
method resolve modifiers=[public] static=false byref=false return=array tentative=- params=3 required=1 variadic=false
  param #0 $country type=string nullable=false optional=false default=- byref=false variadic=false promoted=false
  param #1 $stickyKey type=?string nullable=true optional=true default=NULL byref=false variadic=false promoted=false
  param #2 $bucket type=?int nullable=true optional=true default=NULL byref=false variadic=false promoted=false
method revision modifiers=[public] static=false byref=false return=int tentative=- params=0 required=0 variadic=false
method stages modifiers=[public] static=false byref=false return=array tentative=- params=0 required=0 variadic=false
method stats modifiers=[public] static=false byref=false return=array tentative=- params=0 required=0 variadic=false
method traffic modifiers=[public] static=false byref=false return=array tentative=- params=0 required=0 variadic=false
string(9) "dw_router"
bool(true)
