#!/usr/bin/env bash
# The test suite (unit, integration; gpu tests skip with their reason where there is no GPU).
# Sets itself up. Extra arguments go to pytest, e.g. `scripts/test.sh -m "not slow"`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec "${UV[@]}" run --locked pytest "$@"
