#!/usr/bin/env bash
# The tester's GPU figures re-measured in one go on a GPU machine: pool throughput side by side
# with its serial baseline (same mix of tasks; default settings, then a second slot count) and the
# cross-process timing spread. Each part under its share of a time budget, a log each, results
# JSON (commit, versions, settings) under OUT, a summary line per part.
#   scripts/remeasure_gpu.sh OUT [SECONDS_IN_ALL] [COMMIT] [PART...]
#   PART: pool (default settings), serial, pool-slotsN (N bench slots), spread   (default: pool serial
#   pool-slots4 spread)
# Runs with the Python on PATH; pass COMMIT where the tree has no git history ("" for none).
set -uo pipefail
out="${1:?usage: scripts/remeasure_gpu.sh OUT [SECONDS_IN_ALL] [COMMIT] [PART...]}"; shift
budget="${1:-3600}"; [ $# -gt 0 ] && shift
commit="${1:-}"; [ $# -gt 0 ] && shift
parts=("$@"); [ ${#parts[@]} -gt 0 ] || parts=(pool serial pool-slots4 spread)
mkdir -p "$out"
export PYTHONUNBUFFERED=1
cache="${CUDARL_BENCH_CACHE:-/tmp/cudarl-bench-cache}"
tag=(); [ -n "$commit" ] && tag=(--commit "$commit")
for part in "${parts[@]}"; do
  left=$((budget - SECONDS))
  if [ "$left" -le 30 ]; then echo "$part: not run (time is up)" >> "$out/summary.txt"; continue; fi
  case "$part" in
    pool) args=(benchmarks/pool_throughput.py --only pool --cache "$cache" --out "$out/pool_throughput.json") ;;
    serial) args=(benchmarks/pool_throughput.py --only serial --cache "$cache" --out "$out/pool_throughput.json") ;;
    pool-slots*) args=(benchmarks/pool_throughput.py --only pool --bench-slots "${part#pool-slots}" --cache "$cache"
                       --out "$out/pool_throughput-${part#pool-slots}slots.json") ;;
    spread) args=(benchmarks/timing_spread.py --out "$out/timing_spread.json") ;;
    *) echo "$part: unknown part (pool, serial, pool-slotsN, spread)" >> "$out/summary.txt"; continue ;;
  esac
  timeout "$left" python3 "${args[@]}" "${tag[@]}" > "$out/$part.log" 2>&1
  echo "$part: rc=$? (ended at ${SECONDS}s)" >> "$out/summary.txt"
done
cat "$out/summary.txt"
