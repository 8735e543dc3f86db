# shellcheck shell=bash
# Where PHP's own test runner is, for the PHP whose php-config is on PATH (the devenv's):
# derived, not written down, since the directory names the module API (20240924 for 8.4).
# Sourced by scripts/run-tests and by the Makefile's `make stubs`.

# Prints the path of run-tests.php: Debian's php-dev installs it in the extension
# directory's build/ (/usr/lib/php/API/build), an upstream `make install` in
# PREFIX/lib/php/build. Fails, saying so, when php-dev is not installed.
php_run_tests_script() {
  local candidate
  for candidate in "$(php-config --extension-dir)/build/run-tests.php" \
    "$(php-config --prefix)/lib/php/build/run-tests.php"; do
    [[ -f $candidate ]] && { echo "$candidate"; return 0; }
  done
  echo "run-tests.php not found beside $(php-config --extension-dir) (is php-dev installed?)" >&2
  return 1
}
