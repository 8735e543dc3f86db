<?php

declare(strict_types=1);

/*
 * Include this from a front controller to always have a \RegionRouter: the native one
 * when the dw_router extension is loaded, the userland twin otherwise.
 *
 *     require '/path/to/php/bootstrap.php';
 *     $route = (new RegionRouter())->resolve($_SERVER['HTTP_CF_IPCOUNTRY'] ?? '');
 */

if (!extension_loaded('dw_router') && !class_exists('RegionRouter', false)) {
    require_once __DIR__ . '/RegionRouter.php';
    class_alias(\DwRouter\RegionRouter::class, 'RegionRouter');
}
