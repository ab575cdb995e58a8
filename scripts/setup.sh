#!/usr/bin/env bash
# Make the project's environment (uv, then `uv sync` from the lock file). Idempotent; sourced by
# scripts/eval.sh and scripts/test.sh so that both work on a fresh machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if command -v uv >/dev/null 2>&1; then
  UV=(uv)
elif python3 -m uv --version >/dev/null 2>&1; then
  UV=(python3 -m uv)
else
  echo "setup: installing uv with pip" >&2
  python3 -m pip install --quiet uv
  UV=(python3 -m uv)
fi
# The verl and docker extras too: their tests are part of the suite (an exact sync without them removes them)
"${UV[@]}" sync --locked --extra verl --extra docker --quiet
