<?php

declare(strict_types=1);

/*
 * Page-cache tags (docs/routing.md, "Cache tags"): the tags of an answer, from the twin's
 * walk of the chain (php/RegionRouter.php's cacheTags(), the same bytes as dw-routing's
 * Table::cache_tags), and the tags a purge line names (php/purge.php). No I/O.
 */

namespace DwRouter;

final class CacheTags
{
    /** The longest tag written as itself; a longer one is `dw:long`. */
    public const MAX_TAG_BYTES = 128;
    /** A purge body's limits: lines, bytes, and bytes of the X-LiteSpeed-Purge value. */
    public const MAX_LINES = 1000;
    public const MAX_BODY_BYTES = 65536;
    public const MAX_HEADER_BYTES = 8000;
    /** The longest encoded region key of a purge line (`region/` + this many bytes). */
    public const MAX_KEY_BYTES = 384;

    /** The policy lines and `all`, with the tag each purges. */
    private const LINE_TAGS = [
        'policy/global:pick' => 'dw',
        'policy/global:chain' => 'dw:chain',
        'policy/global:continent_of' => 'dw:cont',
        // A change of visitor buckets' N (on to on, on to off): pages a bucket decided,
        // which cacheTags() tags dw:b (off to on is sent as `all` by the agent).
        'policy/global:buckets' => 'dw:b',
        'all' => 'dw',
    ];

    /** A region key as tags and purge lines write it: bytes outside A-Za-z0-9_./- as %XX. */
    public static function encodeKey(string $key): string
    {
        return (string) preg_replace_callback(
            '/[^A-Za-z0-9_.\/-]/',
            static fn (array $m): string => \sprintf('%%%02X', \ord($m[0])),
            $key,
        );
    }

    /**
     * The tags of an answer from the steps of the twin's walk (explain()'s steps): `dw`,
     * `dw:r:<key>` of the answering step, `dw:m:<key>` of each skipped key in chain order,
     * `dw:chain` for an answer of the defaults or fail-open, `dw:cont` when a continent
     * step was walked, then `dw:b` when a visitor bucket picked the origin ($byBucket:
     * the walk's hash key came from the bucket); a tag over 128 bytes is `dw:long`; none
     * twice.
     *
     * @param list<array<string, mixed>> $steps
     * @return list<string>
     */
    public static function ofSteps(array $steps, bool $answered, bool $byBucket = false): array
    {
        $tags = ['dw'];
        $push = static function (string $tag) use (&$tags): void {
            $tag = \strlen($tag) > self::MAX_TAG_BYTES ? 'dw:long' : $tag;
            if (!\in_array($tag, $tags, true)) {
                $tags[] = $tag;
            }
        };
        $last = $answered && $steps !== [] ? $steps[\count($steps) - 1] : null;
        if ($last !== null) {
            $push('dw:r:' . self::encodeKey((string) $last['geo']));
        }
        $continent = false;
        foreach ($steps as $step) {
            if (\in_array($step['outcome'], ['no key', 'invalid'], true) && \is_string($step['geo'])) {
                $push('dw:m:' . self::encodeKey($step['geo']));
            }
            $continent = $continent || $step['stage'] === 'continent';
        }
        if ($last === null || \in_array($last['stage'], ['default', 'failover'], true)) {
            $push('dw:chain');
        }
        if ($continent) {
            $push('dw:cont');
        }
        if ($byBucket) {
            $push('dw:b');
        }

        return $tags;
    }

    /**
     * The tags one purge line names; null for a malformed line. `region/<key>` (the key
     * encoded as in the tags, 1..=384 bytes) purges `dw:r:<key>`, `dw:m:<key>` and
     * `dw:long`, or `dw:long` alone when those would be over 128 bytes.
     *
     * @return list<string>|null
     */
    public static function ofPurgeLine(string $line): ?array
    {
        if (isset(self::LINE_TAGS[$line])) {
            return [self::LINE_TAGS[$line]];
        }
        if (preg_match('/\Aregion\/((?:[A-Za-z0-9_.\/-]|%[0-9A-F]{2})+)\z/', $line, $m) !== 1
            || \strlen($m[1]) > self::MAX_KEY_BYTES) {
            return null;
        }
        if (\strlen('dw:r:' . $m[1]) > self::MAX_TAG_BYTES) {
            return ['dw:long'];
        }

        return ['dw:r:' . $m[1], 'dw:m:' . $m[1], 'dw:long'];
    }

    /**
     * A purge body's tags, each once, in the order first named; or why it is refused: 400
     * (empty, or a malformed line), 413 (over 1000 lines or 64 KiB, or tags whose
     * X-LiteSpeed-Purge value would be over 8000 bytes). Lines are `\n`-separated; one
     * final `\n` is allowed.
     *
     * @return list<string>|int
     */
    public static function ofPurgeBody(string $body): array|int
    {
        if (\strlen($body) > self::MAX_BODY_BYTES) {
            return 413;
        }
        if (str_ends_with($body, "\n")) {
            $body = substr($body, 0, -1);
        }
        if ($body === '') {
            return 400;
        }
        $lines = explode("\n", $body, self::MAX_LINES + 1);
        if (\count($lines) > self::MAX_LINES) {
            return 413;
        }
        $tags = [];
        foreach ($lines as $line) {
            $of = self::ofPurgeLine($line);
            if ($of === null) {
                return 400;
            }
            foreach ($of as $tag) {
                $tags[$tag] = true;
            }
        }
        $tags = array_map('strval', array_keys($tags));

        return \strlen(self::purgeHeader($tags)) > self::MAX_HEADER_BYTES ? 413 : $tags;
    }

    /**
     * The X-LiteSpeed-Purge value purging `$tags`: `tag=a, tag=b`.
     *
     * @param list<string> $tags
     */
    public static function purgeHeader(array $tags): string
    {
        return implode(', ', array_map(static fn (string $tag): string => 'tag=' . $tag, $tags));
    }
}
