#!/usr/bin/env bash
# The vLLM checks on a GPU machine in one go: the vLLM engine's gpu tests, then the rollout
# benchmark (transformers and vLLM arms side by side), each under its share of a time budget,
# with every thread's stack printed if a test or a vLLM part hangs (so a stall says where).
#   scripts/vllm_gpu.sh OUT [SECONDS_IN_ALL] [COMMIT]
# Needs vLLM 0.20.0 importable: either installed, or its packed parts (see the GPU notes of the
# project's developers) unpacked from /tmp/vparts into /tmp/vsite, which this script does.
set -uo pipefail
out="${1:?usage: scripts/vllm_gpu.sh OUT [SECONDS_IN_ALL] [COMMIT]}"
budget="${2:-580}"; commit="${3:-}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if ! python3 -c "import vllm" 2>/dev/null; then
  parts=$(ls /tmp/vparts/part-* 2>/dev/null | wc -l)
  [ "$parts" -ge 4 ] || { echo "vLLM is not importable and /tmp/vparts holds $parts of 4 parts" | tee "$out/summary.txt"; exit 2; }
  [ -d /tmp/vsite ] || { mkdir -p /tmp/vsite && cat /tmp/vparts/part-* | xz -d -T0 | tar -x -C /tmp/vsite; }
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/tmp/vsite"
fi
python3 -c "import vllm, transformers, torch; print('vllm', vllm.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__)" 2>&1 | tail -1 | tee "$out/summary.txt"
left=$((budget - SECONDS))
"$(dirname "$0")/gpu_tests.sh" "$out" $((left / 2)) tests/gpu/test_vllm_gpu.py > /dev/null
left=$((budget - SECONDS))
if [ "$left" -gt 120 ]; then
  timeout "$left" python3 benchmarks/rollout.py --out "$out/rollout.json" --part-timeout $(((left - 150) / 2)) \
    ${commit:+--commit "$commit"} > "$out/rollout.log" 2>&1
  echo "rollout benchmark: rc=$? (ended at ${SECONDS}s)" >> "$out/summary.txt"
else
  echo "rollout benchmark: not run (time is up)" >> "$out/summary.txt"
fi
cat "$out/summary.txt"
