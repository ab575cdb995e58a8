#!/usr/bin/env bash
# The main job: `cudarl eval` (default: the built-in example tasks and kernels). Sets itself up.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec "${UV[@]}" run --locked cudarl eval "$@"
