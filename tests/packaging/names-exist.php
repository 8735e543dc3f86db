<?php
/*
 * The installed texts name only what is installed (tests/packaging/first-install runs it
 * in the root after a first install): every absolute path under /usr/ (but /usr/local/),
 * /etc/default/ or /etc/php/ that a man page, a --help text, a unit, a conffile or an
 * installed doc names exists; none names a source-tree path an operator would look for
 * in vain (docs/*.md, examples/..., packaging/README.md, packaging/monitoring/...); every
 * relative link of an installed Markdown doc resolves to a file.
 *
 *   php names-exist.php FILE_OR_DIR...     (directories: every file below; .gz read unzipped)
 *
 * NAMES_ROOT (optional) is prefixed to each path checked: a root the packages were
 * unpacked into, for trying the check outside a throwaway root.
 *
 * Paths of the packages this root does not install (php8.5-dw-router, lsphp84-dw-router)
 * are allowed by prefix below. Prints each failure and a count; exit 1 on any failure.
 */

// Named by docs shared by every package, installed by a package this root does not have.
const OTHER_PACKAGES = ['/usr/lib/php/20250925' => 'php8.5-dw-router', '/etc/php/8.5' => 'php8.5-dw-router'];

function files_of(string $arg): array
{
    if (is_file($arg)) {
        return [$arg];
    }
    $files = [];
    $it = new RecursiveIteratorIterator(new RecursiveDirectoryIterator($arg, FilesystemIterator::SKIP_DOTS));
    foreach ($it as $file) {
        if ($file->isFile()) {
            $files[] = $file->getPathname();
        }
    }
    sort($files);
    return $files;
}

function text_of(string $file): string
{
    $text = file_get_contents($file);
    if (str_ends_with($file, '.gz')) {
        $text = gzdecode($text);
        // roff: escaped hyphens and backslashes, font changes, zero-width marks.
        $text = strtr($text, ['\\-' => '-', '\\e' => '\\', '\\&' => '', '\\fB' => '', '\\fI' => '', '\\fR' => '', '\\fP' => '']);
    }
    return str_replace('file://', '', $text);
}

$failures = [];
$paths = 0;
$links = 0;
foreach (array_slice($argv, 1) as $arg) {
    foreach (files_of($arg) as $file) {
        if (str_contains(basename($file), 'changelog')) {
            continue; // history, not instructions
        }
        $text = text_of($file);
        preg_match_all('#(?<![\w./~…=-])(/(?:usr|etc/default|etc/php)/[A-Za-z0-9_.@+/*-]*)#u', $text, $m);
        foreach (array_unique($m[1]) as $path) {
            $path = rtrim($path, '.,:-');
            if (str_contains($path, '*')) {
                $path = dirname(substr($path, 0, strpos($path, '*')) . 'x'); // a glob: its directory
            }
            if (str_starts_with($path, '/usr/local/')) {
                continue; // lsphp84-dw-router's, and LiteSpeed's own layout
            }
            foreach (OTHER_PACKAGES as $prefix => $package) {
                if (str_starts_with($path, $prefix)) {
                    continue 2;
                }
            }
            $paths++;
            if (!file_exists(getenv('NAMES_ROOT') . $path)) {
                $failures[] = "$file names $path, which does not exist";
            }
        }
        preg_match_all('#(?<![\w./-])(docs/[\w.-]+\.md|examples/[\w.-]+|packaging/(?:README\.md|monitoring\b[\w./-]*))#', $text, $m);
        foreach (array_unique($m[1]) as $source) {
            $failures[] = "$file names the source-tree path $source";
        }
        if (str_ends_with($file, '.md')) {
            $prose = preg_replace('/^```.*?^```/ms', '', $text);
            preg_match_all('/\]\(\s*([^)\s]+)\s*\)/', $prose, $m);
            foreach ($m[1] as $target) {
                if (preg_match('~^([a-z]+:|#)~', $target)) {
                    continue;
                }
                $links++;
                $target = explode('#', $target, 2)[0];
                if (!file_exists(dirname($file) . '/' . $target)) {
                    $failures[] = "$file links to $target, which does not resolve";
                }
            }
        }
    }
}
foreach ($failures as $failure) {
    echo $failure, "\n";
}
printf("%d named paths checked, %d relative links checked, %d failures\n", $paths, $links, count($failures));
exit($failures ? 1 : 0);
