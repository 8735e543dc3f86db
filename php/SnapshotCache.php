<?php

declare(strict_types=1);

/*
 * The userland twin's snapshot cache (php/RegionRouter.php): how a snapshot file becomes
 * the table a router answers from, and when it is read again.
 *
 * Reload mechanism ("mtime"): every construction stats the snapshot. The decoded `kvs`
 * map (raw value strings) is cached per process, keyed by path (one SnapshotCache per
 * path, held by RegionRouter), and in APCu, keyed by path + mtime + inode + size + device,
 * so a renamed-in snapshot is picked up by the next construction with no invalidation
 * step. A snapshot that cannot be read as a whole keeps the last good table (per process
 * and in APCu) and counts a failed load; a missing file answers fail-open (no table).
 *
 * A table is array{revision: int, prefix: string, kvs: array<array-key, string>,
 * stages: list<array{id: string, revision: int}>}, as SnapshotFile::parse() gives it.
 */

namespace DwRouter;

require_once __DIR__ . '/SnapshotFile.php';

final class SnapshotCache
{
    private const APCU_TABLE = 'dw_router:table:';
    private const APCU_LAST_GOOD = 'dw_router:last_good:';
    private const APCU_TTL = 300;

    /** The file signature the table in use was read from. */
    private ?string $signature = null;
    /**
     * The last good table.
     *
     * @var array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}|null
     */
    private ?array $table = null;
    /** The file signature that last failed (not parsed again). */
    private ?string $badSignature = null;
    private bool $missing = false;
    /** The routing_digest of the file the table was parsed from. */
    private ?string $digest = null;

    // The counters of RegionRouter::stats().
    private int $loads = 0;
    private int $reloadsReused = 0;
    private int $failedLoads = 0;
    private int $apcuHits = 0;
    private float $lastLoadTime = 0.0;
    private ?string $lastError = null;

    public function __construct(private readonly string $path)
    {
    }

    /**
     * The table to answer from now: the file's, when it changed and reads as a whole;
     * otherwise the last good one; null when the file is missing or none was ever good.
     *
     * @param bool $apcu whether to share tables through APCu
     * @param int $maxBytes the largest snapshot read (dw_router.max_snapshot_bytes)
     * @return array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}|null
     */
    public function load(bool $apcu, int $maxBytes): ?array
    {
        clearstatcache(true, $this->path);
        // file_exists() first: the common missing case then raises no (silenced) warning
        // for error handlers that ignore `@`.
        $stat = file_exists($this->path) ? @stat($this->path) : false;
        if ($stat === false) {
            // Fail open, as documented; counted once per disappearance.
            if (!$this->missing) {
                $this->missing = true;
                $this->failedLoads++;
                $this->lastError = 'snapshot missing';
            }

            return null;
        }
        $this->missing = false;

        $signature = self::signature($stat);
        if ($signature === $this->signature) {
            return $this->table;
        }
        if ($signature === $this->badSignature) {
            return $this->lastGood($apcu);
        }
        if ($apcu) {
            $cached = \apcu_fetch(self::APCU_TABLE . $this->path . "\0" . $signature, $hit);
            if ($hit && \is_array($cached)) {
                $this->apcuHits++;
                $this->digest = null;

                return $this->adopt($signature, $cached, false);
            }
        }

        // Read through one handle so the signature names exactly the bytes parsed, even
        // if the agent renames a new snapshot in between.
        $handle = @fopen($this->path, 'rb');
        if ($handle === false) {
            return $this->failed($signature, 'snapshot unreadable', $apcu);
        }
        $fstat = @fstat($handle);
        if ($fstat !== false) {
            $signature = self::signature($fstat);
        }
        if ($fstat !== false && $fstat['size'] > $maxBytes) {
            fclose($handle);

            return $this->failed($signature, 'snapshot larger than max_snapshot_bytes', $apcu);
        }
        $raw = @stream_get_contents($handle, $maxBytes + 1);
        fclose($handle);
        if (!\is_string($raw)) {
            return $this->failed($signature, 'snapshot unreadable', $apcu);
        }
        if (\strlen($raw) > $maxBytes) {
            return $this->failed($signature, 'snapshot larger than max_snapshot_bytes', $apcu);
        }
        // The routing_digest of the file the table was parsed from: parsing this one would
        // give the same answers, so the table is kept, at the new revision.
        $header = SnapshotFile::header($raw);
        if ($header !== null && $this->table !== null && $header[1] === $this->digest) {
            $this->reloadsReused++;

            return $this->adopt($signature, ['revision' => $header[0]] + $this->table, $apcu);
        }
        $table = SnapshotFile::parse($raw);
        if (\is_string($table)) {
            return $this->failed($signature, $table, $apcu);
        }
        $this->digest = $header[1] ?? null;

        return $this->adopt($signature, $table, $apcu);
    }

    /**
     * The load counters, under the names of RegionRouter::stats().
     *
     * @return array{loads: int, reloads_reused: int, failed_loads: int, last_load_time: float, last_error: string|null, apcu_hits: int}
     */
    public function counters(): array
    {
        return [
            'loads' => $this->loads,
            'reloads_reused' => $this->reloadsReused,
            'failed_loads' => $this->failedLoads,
            'last_load_time' => $this->lastLoadTime,
            'last_error' => $this->lastError,
            'apcu_hits' => $this->apcuHits,
        ];
    }

    /**
     * @param array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>} $table
     * @param bool $store whether to store the table in APCu (a table just parsed)
     * @return array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}
     */
    private function adopt(string $signature, array $table, bool $store): array
    {
        $this->signature = $signature;
        $this->table = $table;
        $this->badSignature = null;
        $this->loads++;
        $this->lastLoadTime = microtime(true);
        $this->lastError = null;
        if ($store) {
            \apcu_store(self::APCU_TABLE . $this->path . "\0" . $signature, $table, self::APCU_TTL);
            \apcu_store(self::APCU_LAST_GOOD . $this->path, $table);
        }

        return $table;
    }

    /** @return array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}|null */
    private function failed(string $signature, string $error, bool $apcu): ?array
    {
        $this->badSignature = $signature;
        $this->failedLoads++;
        $this->lastError = $error;

        return $this->lastGood($apcu);
    }

    /** @return array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}|null */
    private function lastGood(bool $apcu): ?array
    {
        if ($this->table === null && $apcu) {
            // Another worker of this pool may have read a good table this one never saw.
            $lastGood = \apcu_fetch(self::APCU_LAST_GOOD . $this->path, $hit);
            if ($hit && \is_array($lastGood)) {
                $this->table = $lastGood;
            }
        }

        return $this->table;
    }

    /** @param array<array-key, int> $stat */
    private static function signature(array $stat): string
    {
        return $stat['mtime'] . ':' . $stat['ino'] . ':' . $stat['size'] . ':' . $stat['dev'];
    }
}
