"""The tester: judges CUDA kernel candidates (guard, compile, sandboxed run, correctness, timing).

Each evaluation is two processes. The judge (``judge``) is trusted: it holds the task's
reference, the secret trial seeds, the expected outputs and the signed result channel, and runs
no candidate code. The runner (``runner``) is the candidate's process: it gets seeds, returns
outputs and timings, and never sees what it would need to fake them.

Covered (each has an exploit in tests/exploits and a test that it is stopped, with the reason):
- Broken candidates: parse errors, no ``ModelNew``, no kernel, compile errors and hung builds,
  crashes, hangs, CUDA errors, early exits, memory hogs, output floods.
- Torch doing the work (direct calls, try/except fallbacks, ATen from C++, inheriting ``Model``)
  and decoy kernels: own kernels must run in a profiled forward, and its output must change when
  their launches are held back (``judging.knockout``; ``[no-own-kernel]``, ``[torch-work]``), so
  an epilogue fused around cuBLAS is honest at any time share; static rules refuse ``Model``
  subclasses.
- Stale memory: the reference never runs in the candidate's process, and freed GPU memory is
  filled with NaN bytes before every checked call.
- Input mutation, aliased outputs, views of inputs, tensor subclasses (runner checks, judged by
  the judge on its own copy of the inputs).
- Caching and replay (pointer, ``id()``, shape or content keyed), batch-and-skip and warm-up
  detection: fresh inputs every trial and every timed call, two timed outputs re-checked at random
  (``[recheck]``), and static rules against state kept across calls (``[cache]``).
- Side streams and background threads: device-wide end events charge late work, and a share of
  runs with work still going after the host saw the stream end is rejected (``[side-stream]``);
  new Python threads are rejected (``[thread]``); static rules refuse stream creation and threads
  in Python and C++.
- Patching the timer, events, synchronize, clocks or harness functions: the harness binds them
  before the candidate is imported, reports replacements (``[patched]``), and checks each event
  time against the host clock (``[timer]``); static rules refuse the patching and introspection.
- Reading the seed or expected outputs (``gc``, frames, ``/proc``, environment, files): none of it
  is in the runner; the static rules refuse the means anyway.
- Precision downgrades (tolerance), shape specialization (hidden-shape trials).
- Persisting-L2 policies: reset before every timed call's flush; refused statically in the source.
- Forged results: the tester believes only HMAC-signed messages from the judge; the runner holds
  neither the pipe nor the key, and its own replies must echo a per-request nonce (``[channel]``).
- Resource attacks: process count watchdog (``resource_limit``), file size limit, no network, GPU
  memory share, every process the candidate starts adopted by the judge and killed with it,
  capabilities dropped in the runner and a non-dumpable judge.

Not covered: the candidate's timing is measured and summarized inside the runner, so a candidate
that got past the static rules and patched the harness's timing code there could report faster
times (not wrong outputs: correctness is the judge's); the static rules refuse every route found
so far (imports, ``torch.sys``-style attribute chains, introspection), and the runner reports
replaced harness and torch functions (``[patched]``), but code that alters them without
replacing them (or writes memory below Python) is not caught at run time.
The reference is timed after candidate code has run, so a process the candidate left loading the
GPU could slow the reference (processes are refused statically and killed at the end, not before
timing). The tester process itself is dumpable, so the runner could flood (not forge) its result
pipe through /proc. Kernels that read other processes' GPU memory. Where the OS refuses
namespaces (unprivileged containers), the verdict's notes say which isolation was missing.

Layout: ``tester.py`` (``Tester.build`` and ``Tester.judge``), ``verdict.py``, ``built.py``,
``judgement.py`` (the job for the judge and the verdict read back), ``batch.py`` (many candidates
with a report), ``kernel_names.py``; ``build/`` (guard, static rules, compile, fast inline, nvcc
split, loading, the compile child, artifacts); ``sandbox/`` (the parent side, isolation, the
channel, the child side); ``judging/`` (judge, runner, correctness, hardening, timing, GPU turns,
reference timing, inputs, the typed job and requests).

This package is a lazy face: ``from cudarl.tester import Verdict`` loads the verdict module only,
so a process that reads verdicts (the runner, a trainer) does not load the tester.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cudarl.tasks.candidate import Candidate, load_candidates
    from cudarl.tester.built import Built
    from cudarl.tester.tester import Tester
    from cudarl.tester.verdict import Outcome, Stage, Verdict

_HOMES = {"Candidate": "cudarl.tasks.candidate", "load_candidates": "cudarl.tasks.candidate",
          "Built": "cudarl.tester.built", "Tester": "cudarl.tester.tester", "Outcome": "cudarl.tester.verdict",
          "Stage": "cudarl.tester.verdict", "Verdict": "cudarl.tester.verdict"}

__all__ = ["Built", "Candidate", "Outcome", "Stage", "Tester", "Verdict", "load_candidates"]
assert sorted(__all__) == sorted(_HOMES)


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'cudarl.tester' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
