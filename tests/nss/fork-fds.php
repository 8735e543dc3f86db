<?php
/*
 * tests/nss/run's PHP side, run by the CLI with dw_router.preload=1 (so MINIT parses the
 * default snapshot and, for a trusted owner given as a name, resolves it with getpwnam_r
 * there). Forks once and prints, as JSON: the descriptors the child holds (fd => target),
 * whether the parent's and the child's address spaces map an nscd database (the lookup
 * went through nscd), and the revision the child's router answers from (the name was
 * resolved: a name that resolves to no user refuses every file, revision 0).
 *
 *   php ... fork-fds.php write PATH REVISION   publish the snapshot first (no extension)
 *   php ... fork-fds.php fork [planted]        fork; "planted" opens a descriptor first
 *                                              (the checker's own test: it must see it)
 */
require __DIR__ . '/../phpt/fixtures/helpers.inc';

function fds(): array
{
    $fds = [];
    foreach (scandir('/proc/self/fd') ?: [] as $fd) {
        if (preg_match('/^\d+$/', $fd)) {
            $fds[(int) $fd] = (string) @readlink("/proc/self/fd/$fd");
        }
    }
    // scandir's own directory descriptor is gone by now, or names /proc/<pid>/fd.
    return array_filter($fds, fn ($target) => !preg_match('#^/proc/\d+/fd$#', $target));
}

function maps_nscd(): bool
{
    return str_contains((string) file_get_contents('/proc/self/maps'), 'nscd');
}

[$mode, $argument, $revision] = [$argv[1] ?? '', $argv[2] ?? '', $argv[3] ?? '0'];
if ($mode === 'write') {
    dw_publish($argument, (int) $revision, ['region/DE' => dw_region('eu-1', ['a'], ['a' => 1])]);
    exit(0);
}
$planted = $argument === 'planted' ? fopen('/etc/passwd', 'r') : null;
$parent_maps_nscd = maps_nscd();
$out = tempnam(sys_get_temp_dir(), 'dw-nss-');
$pid = pcntl_fork();
if ($pid === 0) {
    $report = [
        'fds' => fds(),
        'child_maps_nscd' => maps_nscd(),
        'revision' => (new RegionRouter())->revision(),
    ];
    file_put_contents($out, json_encode($report));
    exit(0);
}
pcntl_waitpid($pid, $status);
$child = json_decode((string) file_get_contents($out), true);
unlink($out);
echo json_encode(['parent_maps_nscd' => $parent_maps_nscd] + ($child ?? ['fds' => null])), "\n";
