"""The Docker sandbox backend's cost per candidate against the namespace backend, side by side in
one run: the compile child's whole round trip (start, import torch's extension builder, read the
job, import the candidate, report, stop) for a candidate that builds nothing, so that the
sandbox's own cost is what is measured, not nvcc's. Both backends start a cold child per
candidate here (the namespace backend's warm children, which hide the torch import, are off);
arms alternate, so a loaded machine slows both alike.

    python3 benchmarks/docker_overhead.py [--repeats 5]

Prints a table; writes ``benchmarks/results/docker_overhead-<date>-<machine>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from run_metadata import ROOT, run_metadata

CANDIDATE = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
            "        return x\n"


def one_build(backend: str, scratch: Path) -> tuple[float, bool]:
    from cudarl.config import CudarlConfig
    from cudarl.tester.build.compile import compile_extension

    config = CudarlConfig.model_validate({"tester": {"sandbox": {"backend": backend}}}).tester
    folder = Path(tempfile.mkdtemp(dir=scratch))
    (folder / "candidate.py").write_text(CANDIDATE)
    build_root = folder / "build"
    build_root.mkdir()
    started = time.perf_counter()
    outcome = compile_extension(folder / "candidate.py", build_root, "90", config.compile, config.sandbox, "bench")
    return time.perf_counter() - started, outcome.ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="candidates per backend (default 5)")
    parser.add_argument("--out", help="the JSON file (default: benchmarks/results/...)")
    parser.add_argument("--commit", help="the commit, where the tree has no .git")
    args = parser.parse_args()
    from cudarl.tester.sandbox.docker_backend import client, ensure_image

    ensure_image(client())  # imported once, outside the timings
    scratch = Path(tempfile.mkdtemp(prefix="cudarl-docker-bench-"))
    times: dict[str, list[float]] = {"namespace": [], "docker": []}
    for repeat in range(args.repeats + 1):  # the first round warms the page cache and is dropped
        for backend in times:
            seconds, ok = one_build(backend, scratch)
            if not ok:
                raise SystemExit(f"the {backend} build failed: the benchmark measures nothing")
            if repeat:
                times[backend].append(seconds)
            print(f"  round {repeat} {backend:9s} {seconds:6.2f} s{'  (warm-up, dropped)' if not repeat else ''}",
                  flush=True)
    rows = {backend: {"median_s": statistics.median(values), "min_s": min(values), "max_s": max(values),
                      "runs": values} for backend, values in times.items()}
    overhead = rows["docker"]["median_s"] - rows["namespace"]["median_s"]
    print(f"\n{'backend':10s} {'median s':>9s} {'min s':>7s} {'max s':>7s}")
    for backend, row in rows.items():
        print(f"{backend:10s} {row['median_s']:9.2f} {row['min_s']:7.2f} {row['max_s']:7.2f}")
    ratio = rows["docker"]["median_s"] / rows["namespace"]["median_s"]
    print(f"Docker's overhead per candidate: {overhead:+.2f} s ({ratio:.2f}x the namespace backend's time)")
    metadata = run_metadata(args.commit)
    name = (metadata["gpu"] or "cpu").replace(" ", "-")
    out = Path(args.out or ROOT / "benchmarks" / "results" /
               f"docker_overhead-{datetime.now(UTC).date().isoformat()}-{name}.json")
    out.write_text(json.dumps({"machine": metadata, "settings": {"repeats": args.repeats, "candidate": "builds nothing",
                                                                  "warm_children": "off (both cold)"},
                               "result": rows | {"overhead_s": overhead}}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
