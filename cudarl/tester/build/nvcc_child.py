"""The kernel-mode compile child: ``python -m cudarl.tester.build.nvcc_child --result-fd N``, job
on stdin. It runs the nvcc commands the tester prepared (one per ``load_inline`` call: the
candidate's CUDA source to a cubin with ``ptxas -v``) and answers ``result`` with each command's
output, the ``ok`` flag and the index of the command that failed.

Why a child: nvcc parses text a policy wrote, and a compiler can be made to eat memory and time
(template and constexpr blow-ups), to read files through its includes or to write where its
options point. In the tester's own process it had no limits at all. Here it gets the limits every
build gets (``compile_limits``: no network, writes only into the build's own folder, memory,
processes, file size, time; every process gone with the child). The candidate's options and
includes are checked before this runs (``build_options``, ``cudarl.build_rules``).

Nothing here imports torch: the child costs a Python start, not a torch import.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from cudarl.tester.sandbox.channel import ResultWriter
from cudarl.tester.sandbox.child_side import start_child


def run_nvcc(job: dict, results: ResultWriter) -> None:
    from cudarl.tester.sandbox.write_guard import confine_to

    workdir = Path(job["workdir"])
    # the compiler's temporary files in the scratch folder (removed by the tester), the cubins in workdir
    writes = confine_to(Path(job["scratch"]), workdir) if job.get("restrict_writes") else "writes unrestricted"
    logs = [f"cudarl: {writes}"]
    results.send("stage", stage="compile")
    for index, command in enumerate(job["commands"]):
        done = subprocess.run(command, capture_output=True, text=True, cwd=workdir)
        logs.append(done.stdout + done.stderr)
        if done.returncode != 0:
            results.finish("compile_error", "compile", [], logs=logs[1:], failed=index)
    results.finish("compiled", "compile", [], logs=logs[1:], failed=None)


def apply_limits(limits: dict) -> dict:
    from cudarl.tester.build.compile_child import apply_child_limits

    return apply_child_limits(limits)


def main() -> None:
    started = start_child(__doc__, apply_limits, failed_stage="compile")
    if started.job is None:
        return
    run_nvcc(started.job, started.results)


if __name__ == "__main__":
    main()
