#!/usr/bin/env bash
# The several-GPU checks in one go, each under what is left of a time budget, a log each and a
# summary line per part:
#   test    tests/gpu/test_rl_multigpu.py (FSDP2 over 2 GPUs, the policy and a bench worker beside
#           them or on their own, NCCL weight channel, 2 steps with full verdicts, a resume, 1 vs 2
#           ranks' losses)
#   update  benchmarks/update_scaling.py (update tokens/s on 1, 2, 4 GPUs as the machine has them,
#           1.5B-shaped model)
#   sync    benchmarks/weight_sync.py (object store against the NCCL channel)
#   bench   benchmarks/bench_scaling.py (judged candidates per hour on 1 and 2 bench GPUs)
# Seen: the test needs about 6 minutes on 4 H100s and more than 6.5 on 2 H200s (the weight sync
# benchmark 2, the update scaling 4): give each part its own call.
#   scripts/multigpu.sh OUT [SECONDS_IN_ALL] [COMMIT] [PARTS]   (PARTS default: test,update,sync,bench)
# Runs with the Python on PATH. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -uo pipefail
out="${1:?usage: scripts/multigpu.sh OUT [SECONDS_IN_ALL] [COMMIT] [PARTS]}"
budget="${2:-580}"; commit="${3:-}"; parts="${4:-test,update,sync,bench}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NCCL_DEBUG="${NCCL_DEBUG:-WARN}" \
  CUDARL_CACHE_DIR="${CUDARL_CACHE_DIR:-/tmp/cudarl-cache}"
: > "$out/multigpu-summary.txt"
step() {  # step NAME SECONDS COMMAND...: run it if enough time is left, note its exit status
  local name="$1" want="$2"; shift 2
  local left=$((budget - SECONDS))
  if [ "$left" -lt 60 ]; then echo "$name: not run (time is up)" >> "$out/multigpu-summary.txt"; return; fi
  [ "$want" -gt "$left" ] && want="$left"
  timeout "$want" "$@" > "$out/$name.log" 2>&1
  echo "$name: rc=$? (ended at ${SECONDS}s)" >> "$out/multigpu-summary.txt"
}
[[ ",$parts," == *",sync,"* ]] && step weight_sync 120 python3 benchmarks/weight_sync.py \
  --out "$out/weight_sync.json" ${commit:+--commit "$commit"}
[[ ",$parts," == *",test,"* ]] && "$(dirname "$0")/gpu_tests.sh" "$out" "${TEST_SECONDS:-$((budget / 2))}" tests/gpu/test_rl_multigpu.py > /dev/null \
  && cat "$out/summary.txt" >> "$out/multigpu-summary.txt"
[[ ",$parts," == *",bench,"* ]] && step bench_scaling 300 python3 benchmarks/bench_scaling.py --gpus 1,2 --candidates 24 \
  --out "$out/bench_scaling.json" ${commit:+--commit "$commit"}
ranks="$(python3 -c 'import torch; n = torch.cuda.device_count(); print(",".join(str(r) for r in (1, 2, 4, 8) if r <= n))')"
[[ ",$parts," == *",update,"* ]] && step update_scaling 300 python3 benchmarks/update_scaling.py --ranks "$ranks" \
  --steps 5 --timeout 95 --out "$out/update_scaling.json" ${commit:+--commit "$commit"}
cat "$out/multigpu-summary.txt"
