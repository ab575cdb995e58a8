#!/usr/bin/env bash
# The warm start's GPU checks in one go: its gpu test (QLoRA on NF4 weights), then
# benchmarks/sft.py (QLoRA against bf16 LoRA), each under its share of a time budget.
#   scripts/sft_gpu.sh OUT [SECONDS_IN_ALL] [COMMIT] [STEPS]
# Needs bitsandbytes importable: either installed, or its wheel in /tmp/bnbwheel (a GPU machine
# without a network: copy the wheel there first), which this script installs into /tmp/bnbsite.
set -uo pipefail
out="${1:?usage: scripts/sft_gpu.sh OUT [SECONDS_IN_ALL] [COMMIT] [STEPS]}"
budget="${2:-580}"; commit="${3:-}"; steps="${4:-60}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if ! python3 -c "import bitsandbytes" 2>/dev/null; then
  wheel=$(ls /tmp/bnbwheel/bitsandbytes-*.whl 2>/dev/null | head -1)
  [ -n "$wheel" ] || { echo "bitsandbytes is not importable and /tmp/bnbwheel holds no wheel" | tee "$out/summary.txt"; exit 2; }
  [ -d /tmp/bnbsite ] || python3 -m pip install -q --no-deps --no-index --target /tmp/bnbsite "$wheel"
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/tmp/bnbsite"
fi
python3 -c "import bitsandbytes, trl, torch; print('bitsandbytes', bitsandbytes.__version__, 'trl', trl.__version__, 'torch', torch.__version__)" 2>&1 | tail -1 | tee "$out/summary.txt"
"$(dirname "$0")/gpu_tests.sh" "$out" $((budget / 4)) tests/gpu/test_sft_gpu.py > /dev/null
left=$((budget - SECONDS))
if [ "$left" -gt 120 ]; then
  timeout "$left" python3 benchmarks/sft.py --steps "$steps" --out "$out/sft.json" --arm-timeout $(((left - 60) / 2)) \
    ${commit:+--commit "$commit"} > "$out/sft.log" 2>&1
  echo "sft benchmark: rc=$? (ended at ${SECONDS}s)" >> "$out/summary.txt"
else
  echo "sft benchmark: not run (time is up)" >> "$out/summary.txt"
fi
cat "$out/summary.txt"
