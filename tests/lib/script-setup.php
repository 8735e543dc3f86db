<?php

declare(strict_types=1);

/*
 * The setup the differential test and the twin's self-test share: diagnostics become
 * failures, and a private temporary directory holds the snapshots they write.
 */

/**
 * Turns every diagnostic into an ErrorException, so that a warning or notice fails the
 * lookup that raised it. An @-silenced one does not: it never reaches a front
 * controller's error log either.
 */
function throw_on_diagnostics(): void
{
    set_error_handler(static function (int $severity, string $message, string $file, int $line): bool {
        if ((error_reporting() & $severity) === 0) {
            return false;
        }
        throw new ErrorException($message, 0, $severity, $file, $line);
    });
}

/**
 * A new directory of this process's own (mode 0700) under the system's temporary
 * directory, emptied and removed at shutdown. When it cannot be made, says so as `$tool`
 * and exits 2 (cannot run).
 */
function private_temp_dir(string $tool): string
{
    $dir = sys_get_temp_dir() . "/dw-$tool-" . getmypid() . '-' . bin2hex(random_bytes(4));
    if (!mkdir($dir, 0700)) {
        fwrite(STDERR, "$tool: cannot create $dir\n");
        exit(2);
    }
    register_shutdown_function(static function () use ($dir): void {
        foreach (glob($dir . '/*') ?: [] as $file) {
            @unlink($file);
        }
        @rmdir($dir);
    });
    return $dir;
}
