"""The runner: the only process that executes the candidate. Untrusted by design.

Started by the judge (``python -m cudarl.tester.judging.runner REQUEST_FD REPLY_FD [--warm-profiler]``),
which adopts and kills every process the candidate starts. With ``--warm-profiler`` it starts
CUDA and the profiler before reading any request, while the judge is still starting. It never
sees the task's ``Model``, the trial seeds before they are used, the expected outputs, the
tester's result pipe or its key. It answers the judge's requests one at a time:

- ``reference`` (load-only judging, before ``load``): import the task's reference and build its
  ``Model`` once, then drop it; a failure is the reply's ``reference_error`` (no candidate code has
  run yet, so the judge can trust it and call it the harness's error);
- ``load``: import the candidate (after CUDA is up, capabilities are dropped and writes are confined
  to its folders), build ``ModelNew``;
- ``rebuild``: rebuild ``ModelNew`` at the hidden shapes;
- ``trial``: generate inputs from a seed (as the judge does), poison free GPU memory, call forward,
  report outputs (raw bytes), plain-tensor/aliasing/input-mutation/thread problems and, when
  asked, the kernels the call launched;
- ``time``: time forward with fresh inputs per timed call, and return two timed outputs for the
  judge to re-check.

Every reply echoes the request's nonce. The judge, not this process, decides the verdict.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

from cudarl.tester.judging.inputs import input_fingerprint, make_inputs
from cudarl.tester.judging.records import (
    LoadRequest,
    PatchedRequest,
    RebuildRequest,
    ReferenceRequest,
    TimeRequest,
    TrialRequest,
    request_from_wire,
)

# Bound before the candidate exists: the frame writer and what it relies on.
from cudarl.tester.sandbox import channel as _channel
from cudarl.tester.sandbox.child_side import classify, describe_exception

_REQUEST_FD = _REPLY_FD = -1
_write_frame = _channel.write_frame
_read_frame = _channel.read_frame


class Runner:
    def __init__(self, warm_profiler: bool = False) -> None:
        import torch

        from cudarl.tester.judging import hardening, knockout
        from cudarl.tester.judging.launch_shim import LaunchShim

        self.torch = torch
        self.hardening = hardening
        self.knockout = knockout.Knockout(LaunchShim.loaded())
        self.tensor_type = torch.Tensor
        self.device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
        self.reference = None
        self.candidate = None
        self.model = None
        self.init_seed = 0
        self.originals = None
        self.thread_baseline: set[int] = set()
        self.notes: list[str] = []
        if warm_profiler and self.device.type == "cuda":
            seconds = hardening.warm_profiler(self.device)
            self.notes.append(f"profiler started before the candidate was loaded ({seconds:.1f} s, overlapped)")

    # inputs and outputs
    def inputs_for(self, seed: int) -> list:
        self.torch.manual_seed(seed)
        return make_inputs(self.reference, self.device)

    def _outputs(self, output) -> list:
        return list(output) if isinstance(output, (tuple, list)) else [output]

    def _problems(self, outputs: list, inputs: list, saved: list) -> list[str]:
        from cudarl.tester.judging import correctness

        problems = []
        for index, value in enumerate(outputs):
            if isinstance(value, self.tensor_type):
                reason = correctness.check_plain_tensor(value, f"output {index}")
                if reason:
                    problems.append(reason)
        alias = self.hardening.aliasing(outputs, inputs)
        if alias:
            problems.append(alias)
        changed = correctness.inputs_unchanged(saved, inputs)
        if changed:
            problems.append(changed)
        return problems + self._integrity_problems()

    def _integrity_problems(self) -> list[str]:
        """Harness or torch functions the candidate replaced, and threads it left running."""
        problems = []
        replaced = self.originals.changed() if self.originals else []
        if replaced:
            problems.append(f"[patched] the candidate replaced {', '.join(replaced)}")
        threads = self.hardening.new_threads(self.thread_baseline)
        if threads:
            problems.append(f"[thread] the candidate left Python threads running: {', '.join(threads)}")
        return problems

    def _pack(self, outputs: list) -> tuple[list[dict], list[bytes]]:
        metas, blobs = [], []
        for value in outputs:
            if isinstance(value, self.tensor_type) and type(value) is self.tensor_type:
                meta, raw = _channel.tensor_to_blob(value)
                metas.append({"kind": "tensor", **meta})
                blobs.append(raw)
            elif isinstance(value, self.tensor_type):
                metas.append({"kind": "subclass", "type": type(value).__name__})
            else:
                metas.append({"kind": "value", "repr": repr(value)[:200],
                              "value": value if isinstance(value, (int, float, bool, type(None))) else None})
        return metas, blobs

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    # requests
    def reference_check(self, request: ReferenceRequest) -> dict:
        """Load-only judging: the reference imported and its ``Model`` built, in place of the
        judge doing it (which would cost the judge a torch import of its own)."""
        from cudarl.files import import_source

        try:
            os.chdir(Path(request.task_path).parent)
            self.reference = import_source(Path(request.task_path), "cudarl_reference")
            self.torch.manual_seed(request.init_seed)
            model = self.reference.Model(*self.reference.get_init_inputs())
            del model, self.reference.Model  # the runner needs only get_inputs and get_init_inputs
        except BaseException as exc:  # noqa: BLE001 - the task's failure, reported as such
            self.reference = None
            return {"ok": True, "reference_error": describe_exception(exc)}
        return {"ok": True, "reference_error": None}

    def load(self, request: LoadRequest) -> dict:
        from cudarl import _compat
        from cudarl.files import import_source
        from cudarl.tester.build.loading import install_load_inline_hook

        os.chdir(Path(request.candidate_path).parent)  # a warm judge's runner started elsewhere
        _compat.exact_fp32_math()  # as in the judge; the candidate may switch TF32 on for itself
        if self.reference is None:  # not imported already by a reference request (one job per runner)
            self.reference = import_source(Path(request.task_path), "cudarl_reference")
        if hasattr(self.reference, "Model"):
            del self.reference.Model  # the runner needs only get_inputs and get_init_inputs
        if self.device.type == "cuda":
            self.torch.cuda.set_per_process_memory_fraction(request.gpu_memory_fraction)
            self.torch.ones(1, device=self.device).add_(1)  # CUDA context up before privileges go
            self.torch.cuda.synchronize()
        if request.drop_capabilities:
            self.notes.append(self.hardening.drop_capabilities())
        if request.restrict_writes:
            from cudarl.tester.sandbox.write_guard import confine_to

            self.notes.append(f"runner: {confine_to(Path(request.candidate_path).parent, Path(request.build_root))}")
        on_gpu = self.device.type == "cuda"
        if on_gpu:
            self.knockout.install_on_nvrtc()
            if self.knockout.shim:
                self.knockout.shim.own_folder(Path(request.build_root))
        self.originals = self.hardening.Originals()
        self.thread_baseline = self.hardening.thread_idents()
        install_load_inline_hook(Path(request.build_root), request.arch, list(request.cuda_cflags),
                                 request.jobs, stub=not on_gpu, fast=request.inline_fast)
        self.init_seed = request.init_seed
        self.candidate = import_source(Path(request.candidate_path), "cudarl_candidate")
        if not hasattr(self.candidate, "ModelNew"):
            return {"ok": False, "outcome": "load_error", "reasons": ["the candidate module defines no ModelNew"]}
        self._build_model()
        return {"ok": True, "notes": self.notes}

    def _build_model(self) -> None:
        self.torch.manual_seed(self.init_seed)
        self.model = None
        self.model = self.candidate.ModelNew(*self.reference.get_init_inputs()).to(self.device).eval()
        self._sync()

    def rebuild(self, request: RebuildRequest) -> dict:
        for name, value in request.constants.items():
            setattr(self.reference, name, value)
        self._build_model()
        return {"ok": True}

    def trial(self, request: TrialRequest) -> tuple[dict, list[bytes]]:
        torch = self.torch
        with torch.no_grad():
            inputs = self.inputs_for(request.seed)
            fingerprint = input_fingerprint(inputs)
            saved = [v.clone() if isinstance(v, self.tensor_type) else v for v in inputs]
            if request.poison:
                self.hardening.poison_free_memory(self.device)
            kernels, why, dependency = None, "", None
            if request.profile and self.device.type == "cuda":
                output, kernels, why = self.hardening.profile_kernels(lambda: self.model(*inputs), self.device)
            else:
                output = self.model(*inputs)
            self._sync()
            outputs = self._outputs(output)
            problems = self._problems(outputs, inputs, saved)
            metas, blobs = self._pack(outputs)
            if kernels is not None and not problems:
                dependency = self._dependency(inputs, outputs)
        reply = {"ok": True, "outputs": metas, "nested": isinstance(output, (tuple, list)),
                 "problems": problems, "fingerprint": fingerprint, "dependency": dependency,
                 "kernels": None if kernels is None else [k.__dict__ for k in kernels], "profile_note": why}
        return reply, blobs

    def _dependency(self, inputs: list, outputs: list) -> dict:
        """Forward once more on the same inputs, free memory filled with NaN, with the
        candidate's own launches held back (``knockout``); the model is built afresh after, since
        its state (a scratch buffer kept on ``self``) may now hold what was never computed."""
        from cudarl.tester.judging.knockout import poison_

        # Compared against a copy; the outputs themselves are poisoned, since a candidate may
        # return the same buffer every call (kept on ``self``), which a held-back kernel would
        # leave holding the last right answer.
        expected = [o.clone() if isinstance(o, self.tensor_type) else o for o in outputs]
        for value in outputs:
            if isinstance(value, self.tensor_type):
                poison_(value)
        self.hardening.poison_free_memory(self.device)

        def checked_forward() -> list:
            again = self._outputs(self.model(*inputs))
            self._sync()  # a CUDA error surfaces here, inside the check
            return again

        depends, note = self.knockout.forward_depends(checked_forward, expected)
        self._build_model()
        return {"depends": depends, "note": note}

    def time(self, request: TimeRequest) -> tuple[dict, list[bytes]]:
        from cudarl.config import TimingConfig
        from cudarl.tester.judging import timing

        torch = self.torch
        config = TimingConfig(**request.timing)
        flush = timing.l2_flush_buffer(self.device)
        reset_l2 = self.hardening.PersistingL2Reset() if request.reset_l2 else None
        inputs = timing.TimedInputs(self.inputs_for, request.base_seed, request.fresh_inputs)
        chooser = random.Random(request.pick_seed)
        state: dict = {"picked": None, "last": None}

        def keep(index: int, output) -> None:
            clones = [o.clone() if isinstance(o, self.tensor_type) else o for o in self._outputs(output)]
            kept = (inputs.seed(index), clones, isinstance(output, (tuple, list)))
            state["last"] = kept
            if chooser.random() < 1.0 / (index + 1):  # a uniformly random timed call, unknown in advance
                state["picked"] = kept

        with torch.no_grad():
            stats = timing.time_callable(lambda _k: self.model(*inputs.current), flush, config,
                                         prepare=inputs.prepare, on_sample=keep, before_sample=reset_l2)
        checks = [state["picked"], state["last"]]
        metas, blobs = [], []
        for seed, outputs, nested in checks:
            packed, raw = self._pack(outputs)
            metas.append({"seed": seed, "outputs": packed, "nested": nested})
            blobs.extend(raw)
        reply = {"ok": True, "stats": stats.model_dump(), "checks": metas, "problems": self._integrity_problems(),
                 "l2_flush_bytes": flush.numel(), "persisting_l2_reset": bool(reset_l2 and reset_l2.available),
                 "device": torch.cuda.get_device_name(self.device)}
        return reply, blobs

    def patched(self, _request: PatchedRequest) -> dict:
        return {"ok": True, "problems": self._integrity_problems()}


def serve(runner: Runner) -> None:
    """Answer requests until ``quit``; a failure ends the runner after its reply."""
    handlers = {"reference": runner.reference_check, "load": runner.load, "rebuild": runner.rebuild,
                "trial": runner.trial, "time": runner.time, "patched": runner.patched}
    while True:
        try:
            request, _ = _read_frame(_REQUEST_FD)
        except (EOFError, _channel.ChannelError):
            os._exit(0)
        op, nonce = request.get("op"), request.get("nonce")
        if op == "quit":
            os._exit(0)
        stage = request.get("stage", "load")
        try:
            result = handlers[op](request_from_wire(request))
            reply, blobs = result if isinstance(result, tuple) else (result, [])
        except BaseException as exc:  # noqa: BLE001 - the candidate's failure is its verdict
            outcome = classify(exc, stage)
            prefix = "the candidate wrote past the file size limit: " if outcome == "resource_limit" else ""
            _write_frame(_REPLY_FD, {"op": op, "nonce": nonce, "ok": False, "outcome": outcome,
                                     "reasons": [prefix + describe_exception(exc)]})
            if outcome in ("cuda_error", "memory_limit") or op == "load":
                sys.stdout.flush()
                os._exit(0)
            continue
        _write_frame(_REPLY_FD, {**reply, "op": op, "nonce": nonce}, blobs)


def main() -> None:
    global _REQUEST_FD, _REPLY_FD
    _REQUEST_FD, _REPLY_FD = int(sys.argv[1]), int(sys.argv[2])
    serve(Runner(warm_profiler="--warm-profiler" in sys.argv[3:]))


if __name__ == "__main__":
    main()
