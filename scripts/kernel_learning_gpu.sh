#!/usr/bin/env bash
# Kernel-domain learning on a GPU machine: the kernel grids' gpu test (every choice judged with
# full verdicts: wrong ones fail, the others pass, fastest >= 1.5x slowest), then
# benchmarks/kernel_learning.py (the grid judged once, then STEPS steps of GRPO), each under its
# share of a time budget, with a log each and a summary line per part.
#   scripts/kernel_learning_gpu.sh OUT [SECONDS_IN_ALL] [COMMIT] [STEPS] [PARTS]
# PARTS: "test,bench" (default), "test" or "bench" (one part per call where a call is limited).
set -uo pipefail
out="${1:?usage: scripts/kernel_learning_gpu.sh OUT [SECONDS_IN_ALL] [COMMIT] [STEPS] [PARTS]}"
budget="${2:-580}"; commit="${3:-}"; steps="${4:-30}"; parts="${5:-test,bench}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 CUDARL_CACHE_DIR="${CUDARL_CACHE_DIR:-/tmp/cudarl-cache}"
: > "$out/summary.txt"
if [[ ",$parts," == *",test,"* ]]; then
  share=$budget; [[ ",$parts," == *",bench,"* ]] && share=$((budget * 2 / 5))
  "$(dirname "$0")/gpu_tests.sh" "$out" "$share" tests/gpu/test_kernel_choices_gpu.py > /dev/null
fi
if [[ ",$parts," == *",bench,"* ]]; then
  left=$((budget - SECONDS))
  if [ "$left" -gt 120 ]; then
    timeout "$left" python3 benchmarks/kernel_learning.py --steps "$steps" --out "$out/kernel_learning.json" \
      ${commit:+--commit "$commit"} > "$out/kernel_learning.log" 2>&1
    echo "kernel_learning benchmark: rc=$? (ended at ${SECONDS}s; the JSON holds every step finished)" \
      >> "$out/summary.txt"
  else
    echo "kernel_learning benchmark: not run (time is up)" >> "$out/summary.txt"
  fi
fi
cat "$out/summary.txt"
