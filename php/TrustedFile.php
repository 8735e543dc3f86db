<?php

declare(strict_types=1);

/*
 * Reading a small file only if it is trusted: docs/snapshot-trust.md, rules 1-5, in
 * userland, for the files beside the snapshot that PHP reads without the extension
 * (`<snapshot>.purge-sha256` for purge.php, `<snapshot>.heartbeat` for status.php). It
 * walks from `/` to the file's directory as the extension does, judging each directory
 * and the entry entered in it (lstat), following a symlinked directory where it leads and
 * judging it where it sits; then opens the file (non-blocking) and reads it only if what
 * was opened is what was judged. Without O_PATH and openat, a directory swapped between
 * the walk and the open is a race this narrows (realpath must agree with the walk, the
 * file's inode with its lstat), not one it closes. Needs no other file of php/.
 */

namespace DwRouter;

final class TrustedFile
{
    /** Symbolic links followed on the way to the directory, at most (the kernel's limit). */
    public const MAX_LINKS = 40;

    /**
     * The trusted owner setting: ini dw_router.trusted_owner (the extension's), else the
     * server variable DW_TRUSTED_OWNER; null when neither is set (the directory's owner).
     *
     * @param array<array-key, mixed> $server $_SERVER
     */
    public static function owner(array $server): ?string
    {
        $ini = \ini_get('dw_router.trusted_owner');
        if (\is_string($ini) && trim($ini) !== '') {
            return trim($ini);
        }
        $var = $server['DW_TRUSTED_OWNER'] ?? null;

        return \is_string($var) && trim($var) !== '' ? trim($var) : null;
    }

    /**
     * At most $maxBytes of the file at $path, if it is trusted (rules 1-5, $trustedOwner a
     * user name or numeric uid, null: the owner of the file's directory); else why not,
     * in words that start with $what ('heartbeat file'): "no $what" when there is none,
     * "$what refused: <reason>" otherwise.
     *
     * @return array{bytes: string}|string
     */
    public static function read(string $what, string $path, int $maxBytes, ?string $trustedOwner): array|string
    {
        $refused = static fn (string $reason): string => "$what refused: $reason";
        $slash = strrpos($path, '/');
        $name = $slash === false ? $path : substr($path, $slash + 1);
        if ($name === '' || $name === '.' || $name === '..' || str_contains($path, "\0")) {
            return $refused('the path names no file');
        }
        $directory = $slash === false ? '.' : ($slash === 0 ? '/' : substr($path, 0, $slash));
        // PHP caches lstat results and resolved paths: every look below must be fresh.
        clearstatcache(true);
        $way = self::walk($directory);
        if (!\is_array($way)) {
            return $way === null ? "no $what" : $refused($way);
        }
        [$steps, $dirPath, $dir] = $way;
        // Where realpath() leads must be where the walk arrived (nothing swapped meanwhile).
        if (@realpath($directory) !== $dirPath) {
            return $refused('its directory changed while checked');
        }
        $file = ($dirPath === '/' ? '' : $dirPath) . '/' . $name;
        $lstat = @lstat($file);
        if ($lstat === false) {
            return "no $what";
        }
        $kind = $lstat['mode'] & 0170000;
        if ($kind === 0120000) {
            return $refused('a symbolic link (not followed)');
        }
        if ($kind !== 0100000) {
            return $refused('not a regular file (' . self::kind($kind) . ')');
        }
        // As the extension: the way, the file's kind, then whose files are trusted.
        $trusted = $trustedOwner === null ? null : self::uid($trustedOwner);
        if ($trustedOwner !== null && $trusted === null) {
            return $refused('the trusted owner ' . json_encode($trustedOwner, JSON_UNESCAPED_SLASHES
                | JSON_INVALID_UTF8_SUBSTITUTE) . ' names no user');
        }
        $reason = self::check($steps, $dir, $lstat, $trusted);
        if ($reason !== null) {
            return $refused($reason);
        }
        // Non-blocking ('n'): a FIFO swapped in after the lstat cannot hang the worker.
        $handle = @fopen($file, 'rbne');
        if ($handle === false) {
            return $refused('unreadable');
        }
        // The file opened is the one judged (not replaced or changed since the lstat).
        $opened = @fstat($handle);
        foreach (['dev', 'ino', 'mode', 'uid'] as $field) {
            if ($opened === false || $opened[$field] !== $lstat[$field]) {
                fclose($handle);

                return $refused('changed while read (not the file judged)');
            }
        }
        $bytes = @stream_get_contents($handle, $maxBytes + 1);
        fclose($handle);
        if (!\is_string($bytes)) {
            return $refused('unreadable');
        }
        if (\strlen($bytes) > $maxBytes) {
            return $refused("over $maxBytes bytes");
        }

        return ['bytes' => $bytes];
    }

    /**
     * Walks from `/` to $directory (made absolute against the working directory), one
     * component at a time (lstat); a symlink is read and its target walked in turn, from
     * where it sits. [every step as [directory path, its lstat, entry path, its lstat],
     * the directory's path, its lstat]; null when something on the way is missing; else
     * why not.
     *
     * @return array{0: list<array{0: string, 1: array, 2: string, 3: array}>, 1: string, 2: array}|string|null
     */
    private static function walk(string $directory): array|string|null
    {
        if ($directory[0] !== '/') {
            $cwd = getcwd();
            if ($cwd === false) {
                return 'cannot read the working directory';
            }
            $directory = "$cwd/$directory";
        }
        // open_basedir hides what rule 5 must judge: refused, and said so (not "missing").
        $hidden = static fn (string $path): ?string => (string) \ini_get('open_basedir') === '' ? null
            : "cannot look at $path (open_basedir: every directory from / must be visible)";
        $root = @lstat('/');
        if ($root === false) {
            return $hidden('/') ?? 'cannot look at /';
        }
        $pending = self::components($directory);
        $stack = [['/', $root]];
        $steps = [];
        $links = 0;
        while ($pending !== []) {
            $name = array_shift($pending);
            if ($name === '..') {
                if (\count($stack) > 1) {
                    array_pop($stack);
                }
                continue;
            }
            [$above, $aboveStat] = $stack[\count($stack) - 1];
            $path = ($above === '/' ? '' : $above) . '/' . $name;
            $stat = @lstat($path);
            if ($stat === false) {
                return $hidden($path);
            }
            $steps[] = [$above, $aboveStat, $path, $stat];
            if (($stat['mode'] & 0170000) === 0120000) {
                if (++$links > self::MAX_LINKS) {
                    return 'more than ' . self::MAX_LINKS . ' symbolic links on the way';
                }
                $target = @readlink($path);
                if (!\is_string($target) || $target === '') {
                    return "cannot read the link $path";
                }
                if ($target[0] === '/') {
                    $stack = [$stack[0]];
                }
                array_unshift($pending, ...self::components($target));
                continue;
            }
            if (($stat['mode'] & 0170000) !== 0040000) {
                return "$path on the way is not a directory";
            }
            $stack[] = [$path, $stat];
        }
        [$dirPath, $dir] = $stack[\count($stack) - 1];

        return [$steps, $dirPath, $dir];
    }

    /** The names to walk: empty names and `.` left out, `..` kept (resolved physically). */
    private static function components(string $path): array
    {
        return array_values(array_filter(explode('/', $path), static fn (string $c): bool => $c !== '' && $c !== '.'));
    }

    /**
     * Rules 2-5 on what was found (as crates/snapshot-trust/src/rules.rs words them): the
     * file's mode, its directory's mode, the file's owner, the directory's owner, then the
     * directories above, from `/` down. $trusted: the set trusted owner's uid, or null.
     */
    private static function check(array $steps, array $dir, array $file, ?int $trusted): ?string
    {
        $trusts = static fn (int $uid): bool => $uid === 0 || $uid === ($trusted ?? $dir['uid']);
        $whom = $trusted === null ? "root or the directory's owner {$dir['uid']}" : "root or the trusted owner $trusted";
        if (($file['mode'] & 0022) !== 0) {
            return sprintf('writable by group or others (mode %04o)', $file['mode'] & 07777);
        }
        if (($dir['mode'] & 0022) !== 0) {
            $mode = sprintf('%04o', $dir['mode'] & 07777);
            if (($dir['mode'] & 01000) === 0) {
                return "its directory is writable by group or others (mode $mode)";
            }
            if ($trusted === null) {
                return "its directory is shared (sticky, writable by others, mode $mode) and no trusted"
                    . ' owner is set (dw_router.trusted_owner, DW_TRUSTED_OWNER)';
            }
        }
        if (!$trusts($file['uid'])) {
            return "owned by uid {$file['uid']}, not $whom";
        }
        if (!$trusts($dir['uid'])) {
            return "its directory is owned by uid {$dir['uid']}, not $whom";
        }
        foreach ($steps as [$abovePath, $above, $nextPath, $next]) {
            if (!$trusts($above['uid'])) {
                return "$abovePath on the way to it is owned by uid {$above['uid']}, not $whom";
            }
            if (($above['mode'] & 0022) === 0) {
                continue;
            }
            $mode = sprintf('%04o', $above['mode'] & 07777);
            if (($above['mode'] & 01000) === 0) {
                return "$abovePath on the way to it is writable by group or others (mode $mode)";
            }
            // In a sticky shared directory only root's entries, or a set trusted owner's.
            if ($next['uid'] !== 0 && $next['uid'] !== $trusted) {
                return "$abovePath is shared (sticky, writable by others, mode $mode) and $nextPath in it is"
                    . " owned by uid {$next['uid']}, not "
                    . ($trusted === null ? 'root (no trusted owner is set)' : "root or the trusted owner $trusted");
            }
        }

        return null;
    }

    /** A user name's or numeric uid's uid; null when it names no user. */
    private static function uid(string $owner): ?int
    {
        if (preg_match('/\A[0-9]{1,10}\z/', $owner) === 1 && (int) $owner <= 0xFFFFFFFF) {
            return (int) $owner;
        }
        $entry = \function_exists('posix_getpwnam') ? @posix_getpwnam($owner) : false;

        return \is_array($entry) ? (int) $entry['uid'] : null;
    }

    private static function kind(int $kind): string
    {
        return match ($kind) {
            0010000 => 'a FIFO',
            0040000 => 'a directory',
            0140000 => 'a socket',
            0020000 => 'a character device',
            0060000 => 'a block device',
            default => 'not a file',
        };
    }
}
