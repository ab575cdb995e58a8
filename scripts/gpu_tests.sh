#!/usr/bin/env bash
# The gpu tests, one file at a time (files share one build cache, so later files reuse earlier
# builds; running files side by side on one machine was slower than one after another), each
# with its own time limit, a log per file under OUT and a summary line per file at the end.
#   scripts/gpu_tests.sh OUT [SECONDS_IN_ALL] [FILE...]     (default: every tests/gpu file)
# Runs with the Python on PATH (no set-up: the GPU machine brings its own packages; one whose
# transformers is older than 5.24 needs transformers==5.24.0 and peft==0.21.2 put on PYTHONPATH).
set -uo pipefail
out="${1:?usage: scripts/gpu_tests.sh OUT [SECONDS_IN_ALL] [FILE...]}"; shift
budget="${1:-3600}"; [ $# -gt 0 ] && shift
files=("$@"); [ ${#files[@]} -gt 0 ] || files=(tests/gpu/test_*.py)
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 CUDARL_CACHE_DIR="${CUDARL_CACHE_DIR:-/tmp/cudarl-cache}"
for file in "${files[@]}"; do
  left=$((budget - SECONDS))
  name="$(basename "$file" .py)"
  if [ "$left" -le 10 ]; then echo "$name: not run (time is up)" >> "$out/summary.txt"; continue; fi
  timeout "$left" python3 -m pytest -p pytest_timeout "$file" -m gpu -q -rA -s -p no:cacheprovider \
    -o faulthandler_timeout=300 --durations=5 > "$out/$name.log" 2>&1
  rc=$?
  echo "$name: rc=$rc $(grep -E '[0-9]+ (passed|failed|skipped)' "$out/$name.log" | tail -1)" \
    "(ended at ${SECONDS}s)" >> "$out/summary.txt"
done
cat "$out/summary.txt"
