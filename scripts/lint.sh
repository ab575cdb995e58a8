#!/usr/bin/env bash
# Lint (ruff, settings in pyproject.toml). Sets itself up like scripts/test.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec "${UV[@]}" run --locked ruff check "$@" .
