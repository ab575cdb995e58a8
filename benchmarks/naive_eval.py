"""A plain KernelBench-style evaluation, the baseline that ``exploit_corpus.py`` compares with.

Run as ``python benchmarks/naive_eval.py JOB_JSON``; prints one JSON line. What it does is what
public harnesses do: build the reference ``Model`` and ``ModelNew`` with the same seed, then for
5 trials draw inputs, run the reference and then the candidate on the same tensors and accept
when ``torch.allclose(atol=1e-2, rtol=1e-2)`` holds; time both with CUDA events over fixed inputs
(3 warm-up runs, 50 timed). Everything runs in this one process, candidate included.

To compare judging and not building, the candidate's ``load_inline`` calls are steered to the
extension cudarl already built (the same call and flags, ``loading.install_load_inline_hook``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def evaluate(job: dict) -> dict:
    import torch

    from cudarl.files import import_source
    from cudarl.tester.build.loading import install_load_inline_hook

    install_load_inline_hook(Path(job["build_root"]), job["arch"], job["cuda_cflags"], 1, stub=False,
                             fast=job.get("inline_fast"))
    reference = import_source(Path(job["task_path"]), "reference")
    try:
        candidate = import_source(Path(job["candidate_path"]), "candidate")
        torch.manual_seed(42)
        model = reference.Model(*reference.get_init_inputs()).cuda()
        torch.manual_seed(42)
        model_new = candidate.ModelNew(*reference.get_init_inputs()).cuda()
        for trial in range(5):
            torch.manual_seed(1000 + trial)
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in reference.get_inputs()]
            with torch.no_grad():
                expected = model(*inputs)
                output = model_new(*inputs)
            torch.cuda.synchronize()
            if output.shape != expected.shape or not torch.allclose(output, expected, atol=1e-2, rtol=1e-2):
                return {"verdict": "failed", "reason": f"trial {trial}: output mismatch"}
        times = {}
        for label, which in (("reference", model), ("candidate", model_new)):
            with torch.no_grad():
                for _ in range(3):
                    which(*inputs)
                torch.cuda.synchronize()
                samples = []
                for _ in range(50):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    which(*inputs)
                    end.record()
                    torch.cuda.synchronize()
                    samples.append(start.elapsed_time(end))
            samples.sort()
            times[label] = samples[len(samples) // 2]
        return {"verdict": "passed", "speedup": times["reference"] / max(times["candidate"], 1e-6),
                "reference_ms": times["reference"], "candidate_ms": times["candidate"]}
    except Exception as exc:  # noqa: BLE001 - the baseline records failures like the public harnesses
        return {"verdict": "failed", "reason": f"{type(exc).__name__}: {str(exc)[:200]}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("job", metavar="JOB_JSON", help="the job file exploit_corpus.py writes")
    job = json.loads(Path(parser.parse_args().job).read_text())
    started = time.monotonic()
    result = evaluate(job)
    result["seconds"] = time.monotonic() - started
    print("NAIVE-RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
