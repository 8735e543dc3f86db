<?php

declare(strict_types=1);

/*
 * The userland twin's settings (php/RegionRouter.php): constructor options and the
 * extension's ini entries (dw_router.*), read as the extension reads them.
 */

namespace DwRouter;

final class Settings
{
    /** @param array<string, mixed> $options */
    public static function stringOption(array $options, string $name): ?string
    {
        $value = $options[$name] ?? null;

        return \is_string($value) && $value !== '' ? $value : null;
    }

    public static function iniString(string $name): ?string
    {
        $value = \ini_get($name);

        return \is_string($value) && $value !== '' ? $value : null;
    }

    public static function iniBytes(string $name): ?int
    {
        $value = self::iniString($name);
        if ($value === null || preg_match('/^\s*(\d+)\s*([kKmMgG]?)\s*$/', $value, $m) !== 1) {
            return null;
        }
        $shift = ['' => 0, 'k' => 10, 'm' => 20, 'g' => 30][strtolower($m[2])];

        return (int) $m[1] << $shift;
    }
}
