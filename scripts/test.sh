#!/usr/bin/env bash
# The test suite (unit, integration; gpu tests skip with their reason where there is no GPU).
# Sets itself up. Without a -m of its own it runs the default suite, `-m "not slow"` (about 4.5 min
# on 2 cores, set-up included); `scripts/test.sh -m slow` runs the slow tests (full extension
# builds, every Ray scenario, the demo, Docker, Prometheus: about 37 min on 2 cores); CI runs
# both (.ci/run). tests/README.md says what each tier holds and costs. Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
marker=(-m "not slow")
for argument in "$@"; do
  case "$argument" in -m|-m*) marker=() ;; esac
done
exec "${UV[@]}" run --locked --extra verl --extra docker pytest "${marker[@]}" "$@"
