<?php

declare(strict_types=1);

/*
 * The staged-rollout overlay rule (docs/routing.md, "Stages") for PHP code that must know
 * what a node routes from while stages are open (the chaos checker, tests): the same
 * result as dw_routing::stage::overlay, which the agent applies. Both are pinned to the
 * cases of crates/routing/tests/overlay-cases.json (the Rust side in
 * crates/routing/tests/it/overlay_cases.rs, this one in tests/differential/twin-selftest.php).
 *
 * The rule: the routing keys (every key but <prefix>stage/...) with, for every readable
 * stage whose cohort holds the node, the stage's values in place (null: the key is absent
 * on the node); a key two or more readable stages touch applies from none of them, on any
 * node; a stage that cannot be read (not a schema-1 record, id not its key's, a key that
 * cannot be staged, limits) applies nowhere. Both are named in `problems`.
 *
 * A record is read as serde reads dw_routing::stage::Stage: unknown top-level fields are
 * ignored, unknown cohort fields are an error, every field has its exact JSON type (an
 * integer is not 1.0, a missing string is "" but a null one is an error), and serde's
 * positional form of a struct (a JSON array of its fields in order) is read too. Not
 * mirrored (dwctl never writes it): a field given twice (serde refuses the record,
 * json_decode keeps the last value).
 *
 * \DwStages, its name before it moved into the namespace, stays an alias: PHP code outside
 * this repository and tests/differential/twin-selftest.php use it.
 */

namespace DwRouter;

require_once __DIR__ . '/Cohort.php';

final class Stages
{
    public const SCHEMA = 1;
    public const MAX_STAGED_KEYS = 10000;
    public const MAX_COHORT_NODES = 1000;
    public const MAX_ID_BYTES = 63;
    /** The record's fields in serde's order (its positional form). */
    private const FIELDS = ['schema', 'id', 'cohort', 'kvs', 'base', 'created_by', 'created_at', 'reason'];

    /**
     * What a node routes from.
     *
     * @param array<string, string> $kvs the prefix's keys at one revision, stage keys included
     * @param array<string, int> $stageRevisions each stage key's mod_revision (for `stages`)
     * @param string|null $nodeId null: a node without an id (in no cohort)
     * @param array<string, string> $labels the node's labels
     * @return array{kvs: array<string, string>, stages: list<array{id: string, revision: int}>, problems: array<string, string>}
     *         kvs in byte order of their keys, as the agent writes them
     */
    public static function overlay(array $kvs, string $prefix, ?string $nodeId, array $labels = [], array $stageRevisions = []): array
    {
        $stageStart = $prefix . 'stage/';
        $effective = [];
        $stageKeys = [];
        foreach ($kvs as $key => $value) {
            $key = (string) $key;
            if (str_starts_with($key, $stageStart)) {
                $stageKeys[$key] = (string) $value;
            } else {
                $effective[$key] = (string) $value;
            }
        }
        ksort($stageKeys, SORT_STRING);
        $problems = [];
        $stages = []; // key => stage
        foreach ($stageKeys as $key => $value) {
            $stage = self::parse(substr($key, strlen($stageStart)), $value);
            if (is_string($stage)) {
                $problems[$key] = "$stage; the stage applies nowhere";
            } else {
                $stages[$key] = $stage;
            }
        }
        $touched = [];
        foreach ($stages as $stage) {
            foreach ($stage['kvs'] as $relative => $_) {
                $touched[(string) $relative][] = $stage['id'];
            }
        }
        $contested = [];
        foreach ($touched as $relative => $ids) {
            if (count($ids) > 1) {
                $contested[$relative] = true;
                $problems[$prefix . $relative] = sprintf('staged by %d stages (%s); routes from its current value everywhere',
                    count($ids), implode(', ', $ids));
            }
        }
        $applied = [];
        if ($nodeId !== null) {
            foreach ($stages as $key => $stage) {
                if (!Cohort::contains($stage['cohort'], $stage['id'], $nodeId, $labels)) {
                    continue;
                }
                foreach ($stage['kvs'] as $relative => $value) {
                    if (isset($contested[(string) $relative])) {
                        continue;
                    }
                    if ($value === null) {
                        unset($effective[$prefix . $relative]);
                    } else {
                        $effective[$prefix . $relative] = $value;
                    }
                }
                $applied[] = ['id' => $stage['id'], 'revision' => (int) ($stageRevisions[$key] ?? 0)];
            }
        }
        ksort($effective, SORT_STRING);
        ksort($problems, SORT_STRING);

        return ['kvs' => $effective, 'stages' => $applied, 'problems' => $problems];
    }

    /**
     * Reads one stage record, as dw_routing::stage::Stage::parse does: the stage
     * ({id, cohort: {points, nodes, labels}, kvs: relative key => value|null}), or why not.
     *
     * @return array{id: string, cohort: array{points: int, nodes: list<string>, labels: array<string, string>}, kvs: array<string, string|null>}|string
     */
    public static function parse(string $keyId, string $value): array|string
    {
        try {
            $record = json_decode($value, false, 512, JSON_THROW_ON_ERROR);
        } catch (\JsonException $e) {
            return 'not a stage record: ' . $e->getMessage();
        }
        if (is_array($record)) {
            // serde's positional form of a struct: its fields in order, defaults left off
            if (count($record) < 4 || count($record) > count(self::FIELDS)) {
                return 'not a stage record: a positional record has 4 to 8 fields';
            }
            $record = (object) array_combine(array_slice(self::FIELDS, 0, count($record)), $record);
        }
        if (!$record instanceof \stdClass) {
            return 'not a stage record: not an object';
        }
        $fields = get_object_vars($record);
        foreach (['schema', 'id', 'cohort', 'kvs'] as $required) {
            if (!array_key_exists($required, $fields)) {
                return "not a stage record: missing field `$required`";
            }
        }
        if (!is_int($fields['schema']) || $fields['schema'] < 0) {
            return 'not a stage record: schema is not an unsigned integer';
        }
        if (!is_string($fields['id'])) {
            return 'not a stage record: id is not a string';
        }
        foreach (['created_by', 'created_at', 'reason'] as $text) {
            if (array_key_exists($text, $fields) && !is_string($fields[$text])) {
                return "not a stage record: $text is not a string";
            }
        }
        if (array_key_exists('base', $fields)) {
            if (!$fields['base'] instanceof \stdClass) {
                return 'not a stage record: base is not a map';
            }
            foreach (get_object_vars($fields['base']) as $revision) {
                if (!is_int($revision)) {
                    return 'not a stage record: a base revision is not an integer';
                }
            }
        }
        $cohort = self::cohort($fields['cohort']);
        if (is_string($cohort)) {
            return "not a stage record: $cohort";
        }
        if (!$fields['kvs'] instanceof \stdClass) {
            return 'not a stage record: kvs is not a map';
        }
        $staged = [];
        foreach (get_object_vars($fields['kvs']) as $key => $staged_value) {
            if ($staged_value !== null && !is_string($staged_value)) {
                return 'not a stage record: a staged value is neither a string nor null';
            }
            $staged[(string) $key] = $staged_value;
        }
        if ($fields['schema'] !== self::SCHEMA) {
            return sprintf('schema %d is not %d', $fields['schema'], self::SCHEMA);
        }
        if ($fields['id'] !== $keyId) {
            return 'the record names another stage than its key';
        }
        if (!self::validId($fields['id'])) {
            return 'the stage id is not 1 to 63 of a-z, 0-9, ".", "_", "-" starting with a letter or digit';
        }
        if ($cohort['points'] > Cohort::POINTS) {
            return "cohort points {$cohort['points']} is above 10000 (100 %)";
        }
        if (count($cohort['nodes']) > self::MAX_COHORT_NODES || count($cohort['labels']) > self::MAX_COHORT_NODES) {
            return 'a cohort names at most 1000 nodes and 1000 labels';
        }
        if ($staged === []) {
            return 'a stage stages at least one key';
        }
        if (count($staged) > self::MAX_STAGED_KEYS) {
            return 'a stage stages at most 10000 keys, this one ' . count($staged);
        }
        foreach ($staged as $key => $_) {
            if (!self::stageable((string) $key)) {
                return "$key cannot be staged: only region/<geo> and policy/global can";
            }
        }
        ksort($staged, SORT_STRING);

        return ['id' => $fields['id'], 'cohort' => $cohort, 'kvs' => $staged];
    }

    /** Whether a key (relative to the prefix) may be staged: region/<geo> or policy/global. */
    public static function stageable(string $key): bool
    {
        return $key === 'policy/global' || (str_starts_with($key, 'region/') && strlen($key) > strlen('region/'));
    }

    public static function validId(string $id): bool
    {
        return preg_match('/^[a-z0-9][a-z0-9._-]{0,62}$/D', $id) === 1;
    }

    /**
     * A cohort as serde reads dw_routing::stage::Cohort (deny_unknown_fields, points a u16).
     *
     * @return array{points: int, nodes: list<string>, labels: array<string, string>}|string
     */
    private static function cohort(mixed $cohort): array|string
    {
        if (is_array($cohort)) {
            if (count($cohort) > 3) {
                return 'a positional cohort has at most 3 fields';
            }
            $cohort = (object) array_combine(array_slice(['points', 'nodes', 'labels'], 0, count($cohort)), $cohort);
        }
        if (!$cohort instanceof \stdClass) {
            return 'cohort is not an object';
        }
        $out = ['points' => 0, 'nodes' => [], 'labels' => []];
        foreach (get_object_vars($cohort) as $field => $value) {
            switch ((string) $field) {
                case 'points':
                    if (!is_int($value) || $value < 0 || $value > 65535) {
                        return 'cohort points is not an integer from 0 to 65535';
                    }
                    $out['points'] = $value;
                    break;
                case 'nodes':
                    if (!is_array($value)) {
                        return 'cohort nodes is not a list';
                    }
                    foreach ($value as $node) {
                        if (!is_string($node)) {
                            return 'a cohort node is not a string';
                        }
                    }
                    // a set: each id once
                    $out['nodes'] = array_values(array_unique($value));
                    break;
                case 'labels':
                    if (!$value instanceof \stdClass) {
                        return 'cohort labels is not a map';
                    }
                    foreach (get_object_vars($value) as $name => $label) {
                        if (!is_string($label)) {
                            return 'a cohort label value is not a string';
                        }
                        $out['labels'][(string) $name] = $label;
                    }
                    break;
                default:
                    return "unknown cohort field `$field`";
            }
        }

        return $out;
    }
}

\class_alias(Stages::class, 'DwStages');
