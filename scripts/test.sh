#!/usr/bin/env bash
# The test suite (unit, integration; gpu tests skip with their reason where there is no GPU).
# Sets itself up. Without a -m of its own it runs the default suite, `-m "not slow"` (about 11 min
# on 2 cores); `scripts/test.sh -m slow` runs the slow tests (full extension builds, the pool on
# a local Ray cluster, about 13 min); CI runs both (.ci/run). Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
marker=(-m "not slow")
for argument in "$@"; do
  case "$argument" in -m|-m*) marker=() ;; esac
done
exec "${UV[@]}" run --locked --extra verl --extra docker pytest "${marker[@]}" "$@"
