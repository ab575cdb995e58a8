"""A load test of ``POST /v1/optimize`` on localhost, bounded in count and time: requests per
second and p50/p95 latency with a 1-turn budget, and a check that no request was lost or
answered twice (every answer carries a unique ``request_id``).

    uv run python benchmarks/serve_load.py [--requests 40] [--concurrency 4] [--replicas 2] [--model PATH]

Without ``--model``, a tiny model is built here (the demo's: a tokenizer trained on the suite's
kernels, briefly pretrained on them), so answers are short and often hold code; the tester pool
judges them (compile-only without a GPU). Everything runs in one local Ray: the pool, the agent
replicas, the gateway and Serve's HTTP proxy. The run stops sending at ``--seconds``.
Prints a table; writes ``benchmarks/results/serve_load-<date>-<machine>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from run_metadata import ROOT, run_metadata


def post(url: str, body: dict) -> tuple[int, dict, float]:
    started = time.perf_counter()
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return response.status, json.loads(response.read()), time.perf_counter() - started
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}"), time.perf_counter() - started


def tiny_model(folder: Path) -> Path:
    from cudarl.demo.tiny import build_tiny_model
    from cudarl.tasks.builtin import suite_solutions

    kernels = [c.source for c in suite_solutions(form="nvrtc")]
    return build_tiny_model(folder, kernels, pretrain_texts=kernels, pretrain_steps=60)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--replicas", type=int, default=2, help="agent replicas (requests run at once)")
    parser.add_argument("--seconds", type=float, default=600, help="stop sending after this long")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--model", help="a local model folder (default: a tiny one built here)")
    parser.add_argument("--commit", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import ray
    from ray import serve

    from cudarl.config import CudarlConfig
    from cudarl.serve.app import app_from_config

    scratch = Path(tempfile.mkdtemp(prefix="serve-load-"))
    model = args.model or str(tiny_model(scratch / "model"))
    gpu = bool(run_metadata(args.commit)["gpu"])
    config = CudarlConfig.model_validate({
        "tester": {"compile": {"mode": "kernel"}},
        "serve": {"model": model, "engine": "hf", "agent_replicas": args.replicas,
                  "max_new_tokens": args.max_new_tokens, "gpus_per_agent": 0.2 if gpu else 0.0, "temperature": 0.7}})
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ray.init(address="local", num_cpus=max(os.cpu_count() or 1, args.replicas + 4), include_dashboard=False,
             namespace="cudarl", logging_level="ERROR")
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        started = time.perf_counter()
        serve.run(app_from_config(config), name="cudarl", route_prefix="/")
        startup = time.perf_counter() - started
        url = f"http://127.0.0.1:{port}/v1/optimize"
        post(url, {"task_id": "vector_add", "budget": {"turns": 1}})  # warm: the engines' first generation
        bodies = [{"task_id": ("vector_add", "relu")[i % 2], "budget": {"turns": 1, "seconds": 300},
                   "client_key": f"load-{i}"} for i in range(args.requests)]
        deadline = time.perf_counter() + args.seconds
        began = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as threads:
            results = list(threads.map(lambda body: post(url, body) if time.perf_counter() < deadline else None,
                                       bodies))
        wall = time.perf_counter() - began
    finally:
        serve.shutdown()
        ray.shutdown()
    sent = [r for r in results if r is not None]
    ok = [r for r in sent if r[0] == 200]
    ids = [r[1].get("request_id") for r in ok]
    latencies = [r[2] for r in sent]
    row = {"sent": len(sent), "answered_200": len(ok), "statuses": {str(s): sum(r[0] == s for r in sent)
                                                                      for s in {r[0] for r in sent}},
           "duplicate_answers": len(ids) - len(set(ids)), "lost": args.requests - len(sent) if wall < args.seconds
           else 0, "wall_s": wall, "requests_per_s": len(sent) / wall, "p50_s": percentile(latencies, 0.5),
           "p95_s": percentile(latencies, 0.95), "mean_s": statistics.fmean(latencies), "startup_s": startup,
           "outcomes": {o: sum(t["outcome"] == o for _, a, _ in ok for t in a["turns"])
                        for o in {t["outcome"] for _, a, _ in ok for t in a["turns"]}}}
    print(f"\n{'sent':>5} {'200':>5} {'dup':>4} {'req/s':>7} {'p50 s':>7} {'p95 s':>7}  outcomes")
    print(f"{row['sent']:>5} {row['answered_200']:>5} {row['duplicate_answers']:>4} {row['requests_per_s']:>7.2f} "
          f"{row['p50_s']:>7.2f} {row['p95_s']:>7.2f}  {row['outcomes']}")
    metadata = run_metadata(args.commit)
    name = (metadata["gpu"] or "cpu").replace(" ", "-")
    date = datetime.now(UTC).date().isoformat()
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"serve_load-{date}-{name}.json")
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "commit", "model")} | {
        "model": "tiny, built here" if not args.model else "given"}
    out.write_text(json.dumps({"machine": metadata, "settings": settings, "result": row}, indent=2))
    print(f"wrote {out}")
    return 0 if row["duplicate_answers"] == 0 and len(ok) == len(sent) else 1


if __name__ == "__main__":
    raise SystemExit(main())
