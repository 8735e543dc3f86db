<?php

declare(strict_types=1);
// bench/24-bucket-cache.sh: empties LSCache between configurations (every entry of the
// vhost; the bench's own docroot, never shipped).
header('X-LiteSpeed-Purge: *');
echo "purged\n";
