#!/usr/bin/env bash
# The main job: `cudarl demo` (a local Ray; a tiny model built here unless --model names one; the
# warm start; then multi-turn GRPO on the real tester pool; a table and a report folder). Sets
# itself up. Arguments go to `cudarl demo` (--steps, --sft-steps, --model, --config, --out).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec "${UV[@]}" run --locked cudarl demo "$@"
