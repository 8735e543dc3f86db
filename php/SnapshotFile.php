<?php

declare(strict_types=1);

/*
 * Reading a snapshot file's bytes for the userland twin (php/RegionRouter.php):
 * docs/snapshot-format.md, line for line. No I/O: the twin reads the file.
 */

namespace DwRouter;

require_once __DIR__ . '/TypedJson.php';

final class SnapshotFile
{
    /**
     * The revision and `routing_digest` of a file as dw-agent writes it, from the fields
     * before `kvs` (docs/snapshot-format.md); null when it has none there.
     *
     * @return array{0: int, 1: string}|null
     */
    public static function header(string $raw): ?array
    {
        $field = '"(?:prefix|cluster_id)":"[^"\\\\\x00-\x1f]*",|"stages":\[[^\]]*\],';
        $pattern = '/\A\{"format":1,"revision":(0|[1-9][0-9]{0,18}),(?:' . $field . ')*'
            . '"routing_digest":"([^"\\\\\x00-\x1f]+)",(?:' . $field . ')*"kvs":/';
        if (preg_match($pattern, substr($raw, 0, 65536), $match) !== 1) {
            return null;
        }
        $revision = $match[1];
        if (\strlen($revision) === 19 && strcmp($revision, (string) PHP_INT_MAX) > 0) {
            return null;
        }

        return [(int) $revision, $match[2]];
    }

    /**
     * Parses a whole snapshot file (docs/snapshot-format.md).
     *
     * @return array{revision: int, prefix: string, kvs: array<array-key, string>, stages: list<array{id: string, revision: int}>}|string the table, or why the file is refused
     */
    public static function parse(string $raw): array|string
    {
        if ($raw === '') {
            return 'snapshot is empty';
        }
        $document = TypedJson::decode($raw);
        if (!$document instanceof JsonObject) {
            return 'snapshot is not a JSON object';
        }
        $fields = $document->members;
        foreach (['format', 'revision', 'kvs'] as $required) {
            if (!\array_key_exists($required, $fields)) {
                return "snapshot lacks `$required`";
            }
        }
        if ($fields['format'] !== RegionRouter::SNAPSHOT_FORMAT) {
            return 'unsupported snapshot format';
        }
        if (!\is_int($fields['revision']) || $fields['revision'] < 0) {
            return 'revision is not a non-negative integer';
        }
        // `prefix` is optional; null counts as absent, any other non-string refuses the file.
        $prefix = $fields['prefix'] ?? RegionRouter::DEFAULT_PREFIX;
        if (!\is_string($prefix)) {
            return 'prefix is not a string';
        }
        if (!$fields['kvs'] instanceof JsonObject) {
            return 'kvs is not an object';
        }
        foreach ($fields['kvs']->members as $value) {
            if (!\is_string($value)) {
                return 'kvs holds a non-string value';
            }
        }

        /** @var array<array-key, string> $kvs */
        $kvs = $fields['kvs']->members;

        return ['revision' => $fields['revision'], 'prefix' => $prefix, 'kvs' => $kvs,
            'stages' => self::appliedStages($fields['stages'] ?? null)];
    }

    /**
     * The snapshot's optional `stages` field (the stages its agent applied): a list of
     * {id: string, revision: int >= 0}. Informative: any other shape is taken as none.
     *
     * @return list<array{id: string, revision: int}>
     */
    private static function appliedStages(mixed $field): array
    {
        if (!\is_array($field) || !array_is_list($field)) {
            return [];
        }
        $stages = [];
        foreach ($field as $stage) {
            $id = $stage instanceof JsonObject ? ($stage->members['id'] ?? null) : null;
            $revision = $stage instanceof JsonObject ? ($stage->members['revision'] ?? null) : null;
            if (!\is_string($id) || !\is_int($revision) || $revision < 0) {
                return [];
            }
            $stages[] = ['id' => $id, 'revision' => $revision];
        }

        return $stages;
    }
}
