#!/usr/bin/env bash
# The RL loop's GPU checks in one go, each under its share of a time budget, a log each and a
# summary line per part: tests/gpu/test_rl_gpu.py (two steps with full verdicts on one shared GPU;
# its vLLM case runs where vLLM is importable, or unpacked from /tmp/vparts as scripts/vllm_gpu.sh
# does), then benchmarks/grpo_step.py (the update step against a plain one; the plain 1.5B step
# needs about 81 GiB at 4 x 4096: an H200), then benchmarks/rl_step.py (whole RL steps of the
# 1.5B-shaped model split by phase: rollout, judge, update, sync).
#   scripts/rl_gpu.sh OUT [SECONDS_IN_ALL] [COMMIT] [PARTS]
#   PARTS: any of "test", "bench", "step", comma-separated (default "test,bench")
# The kernel-domain learning run has its own script: scripts/kernel_learning_gpu.sh.
set -uo pipefail
out="${1:?usage: scripts/rl_gpu.sh OUT [SECONDS_IN_ALL] [COMMIT] [PARTS]}"
budget="${2:-580}"; commit="${3:-}"; parts="${4:-test,bench}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 CUDARL_CACHE_DIR="${CUDARL_CACHE_DIR:-/tmp/cudarl-cache}"
if ! python3 -c "import vllm" 2>/dev/null && [ "$(ls /tmp/vparts/part-* 2>/dev/null | wc -l)" -ge 4 ]; then
  [ -d /tmp/vsite ] || { mkdir -p /tmp/vsite && cat /tmp/vparts/part-* | xz -d -T0 | tar -x -C /tmp/vsite; }
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/tmp/vsite"
fi
: > "$out/summary.txt"
nparts=0; for p in test bench step; do [[ ",$parts," == *",$p,"* ]] && nparts=$((nparts + 1)); done
[ "$nparts" -gt 0 ] || { echo "no known part in '$parts' (test, bench, step)"; exit 2; }
if [[ ",$parts," == *",test,"* ]]; then
  share=$((budget / nparts))
  "$(dirname "$0")/gpu_tests.sh" "$out" "$share" tests/gpu/test_rl_gpu.py > /dev/null
fi
if [[ ",$parts," == *",bench,"* ]]; then
  left=$((budget - SECONDS)); [[ ",$parts," == *",step,"* ]] && left=$((left / 2))
  if [ "$left" -gt 120 ]; then
    timeout "$left" python3 benchmarks/grpo_step.py --out "$out/grpo_step.json" --arm-timeout $(((left - 90) / 3)) \
      --profile-dir "$out/profile" \
      ${commit:+--commit "$commit"} > "$out/grpo_step.log" 2>&1
    echo "grpo_step benchmark: rc=$? (ended at ${SECONDS}s)" >> "$out/summary.txt"
  else
    echo "grpo_step benchmark: not run (time is up)" >> "$out/summary.txt"
  fi
fi
if [[ ",$parts," == *",step,"* ]]; then
  left=$((budget - SECONDS))
  if [ "$left" -gt 120 ]; then
    timeout "$left" python3 benchmarks/rl_step.py --out "$out/rl_step.json" \
      ${commit:+--commit "$commit"} > "$out/rl_step.log" 2>&1
    echo "rl_step benchmark: rc=$? (ended at ${SECONDS}s)" >> "$out/summary.txt"
  else
    echo "rl_step benchmark: not run (time is up)" >> "$out/summary.txt"
  fi
fi
cat "$out/summary.txt"
