<?php

declare(strict_types=1);

/*
 * JSON decoding for the userland twin (php/RegionRouter.php), which requires this file:
 * objects and lists stay apart, as the extension's reader keeps them.
 */

namespace DwRouter;

/** @internal */
final class TypedJson
{
    /** Nesting limit for every json_decode: a value nested deeper is invalid JSON here. */
    public const DEPTH = 512;

    /**
     * Decodes JSON keeping the distinction PHP's associative decoding loses: objects
     * become JsonObject (so `{}` is not `[]` and `{"0":1}` is not `[1]`), arrays become
     * lists. Returns null for invalid JSON (and for the JSON `null`: no caller accepts it).
     *
     * Object keys starting with NUL are legal JSON but PHP refuses them as property names;
     * for those documents every string is first re-encoded as hex, then decoded back.
     */
    public static function decode(string $json): mixed
    {
        $value = json_decode($json, false, self::DEPTH);
        $error = json_last_error();
        if ($error === JSON_ERROR_NONE) {
            return self::typed($value, false);
        }
        if ($error !== JSON_ERROR_INVALID_PROPERTY_NAME) {
            return null;
        }
        $stringsValid = true;
        $hexed = preg_replace_callback(
            '/"(?:[^"\\\\]++|\\\\.)*+"/s',
            static function (array $token) use (&$stringsValid): string {
                $string = json_decode($token[0], false, 1);
                if (!\is_string($string)) {
                    $stringsValid = false;

                    return '""';
                }

                return '"x' . bin2hex($string) . '"';
            },
            $json,
        );
        if (!\is_string($hexed) || !$stringsValid) {
            return null;
        }
        $value = json_decode($hexed, false, self::DEPTH);
        if (json_last_error() !== JSON_ERROR_NONE) {
            return null;
        }

        return self::typed($value, true);
    }

    private static function typed(mixed $value, bool $hexStrings): mixed
    {
        if ($value instanceof \stdClass) {
            $members = [];
            foreach (get_object_vars($value) as $key => $member) {
                $key = $hexStrings ? self::unhex((string) $key) : $key;
                $members[$key] = self::typed($member, $hexStrings);
            }

            return new JsonObject($members);
        }
        if (\is_array($value)) {
            foreach ($value as $index => $element) {
                $value[$index] = self::typed($element, $hexStrings);
            }

            return $value;
        }
        if ($hexStrings && \is_string($value)) {
            return self::unhex($value);
        }

        return $value;
    }

    private static function unhex(string $hexed): string
    {
        return (string) hex2bin(substr($hexed, 1));
    }
}

/**
 * @internal A decoded JSON object: members keyed as PHP keys them (numeric strings
 *           become ints, which lookups by string still find).
 */
final class JsonObject
{
    /** @param array<array-key, mixed> $members */
    public function __construct(public readonly array $members)
    {
    }
}
