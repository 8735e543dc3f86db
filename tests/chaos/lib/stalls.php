<?php

declare(strict_types=1);

/*
 * Which of a connection's gaps the chaos checker counts apart: kill-lsphp (SIGTERM to a
 * LiteSpeed node's whole lsphp) can leave one of OpenLiteSpeed's connections queued on a
 * listener only OLS still holds, until OLS's initTimeout (60 s) ends it
 * (docs/deploy-litespeed.md). A gap of node N's connection from FROM to TO (ns) is such a
 * stall when it overlaps a kill-lsphp fault of node N, from its start until 1 s after it
 * healed. Used by check.php; tests/chaos/lib/stalls-test.php checks it at its edges.
 */

/** The grace after a kill-lsphp fault heals in which a stall may still begin, ns. */
const DW_CHAOS_KILL_LSPHP_GRACE_NS = 1_000_000_000;

/**
 * @param list<array{0: string, 1: string, 2: int, 3: int}> $faults [kind, node, start ns, end ns]
 */
function dw_chaos_spans_kill_lsphp(array $faults, int $node, int $from, int $to): bool
{
    foreach ($faults as [$kind, $faultNode, $start, $end]) {
        if ($kind === 'kill-lsphp' && $faultNode === (string) $node
            && $from <= $end + DW_CHAOS_KILL_LSPHP_GRACE_NS && $to >= $start) {
            return true;
        }
    }
    return false;
}
