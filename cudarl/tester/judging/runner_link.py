"""The judge's end of the runner (the candidate's process): it starts the runner, sends it
requests with fresh nonces and checks that each reply answers its request; ``outputs_from``
rebuilds the tensors a reply carries. What the replies mean is the judge's business
(``cudarl.tester.judging.judge``); this module only keeps the channel honest.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from cudarl import env
from cudarl.tester.judging import runner
from cudarl.tester.judging.launch_shim import preload_environment
from cudarl.tester.judging.records import RunnerRequest
from cudarl.tester.sandbox import channel

CHANNEL_TAG = "[channel]"


class RunnerGone(Exception):
    """The runner's end of a pipe closed: it died (``RunnerLink.death`` says how)."""


class ForgedReply(Exception):
    """A reply the harness did not write (bad frame, wrong nonce): the candidate is rejected."""


class RunnerLink:
    """The judge's end of the runner: requests with fresh nonces, replies checked against them."""

    def __init__(self, isolate_pids: bool, warm_profiler: bool = False) -> None:
        from cudarl.tester.sandbox.isolation import become_subreaper

        self.subreaper = become_subreaper() if isolate_pids else False
        self.warm_profiler = warm_profiler
        request_read, self.request_write = os.pipe()
        self.reply_read, reply_write = os.pipe()
        shim = env.get(env.CUDARL_LAUNCH_SHIM)  # the own-kernel knockout (judging.launch_shim)
        # -P: the working folder (the candidate's, where its build may have written) is not on the
        # import path, so nothing there shadows a module the runner imports before the candidate.
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", runner.__name__, str(request_read), str(reply_write)]
            + (["--warm-profiler"] if warm_profiler else []),
            stdin=subprocess.DEVNULL, pass_fds=(request_read, reply_write),
            env=env.child_environment(preload_environment(Path(shim))) if shim else None)
        os.close(request_read)
        os.close(reply_write)

    def ask(self, request: RunnerRequest, stage: str,
            on_header: Callable[[dict], None] | None = None) -> tuple[dict, list]:
        """Send a request and read its reply; ``on_header`` (see ``channel.read_frame``) runs only
        for a header that answers this request (its nonce and op)."""
        nonce = secrets.token_hex(16)
        op = request.op

        def answered(header: dict) -> None:
            if on_header is not None and header.get("nonce") == nonce and header.get("op") == op:
                on_header(header)

        try:
            channel.write_frame(self.request_write, {**request.to_wire(), "op": op, "nonce": nonce, "stage": stage})
            reply, blobs = channel.read_frame(self.reply_read, on_header=answered)
        except (EOFError, BrokenPipeError) as exc:
            raise RunnerGone(str(exc)) from exc
        except channel.ChannelError as exc:
            raise ForgedReply(f"{CHANNEL_TAG} the runner sent a frame the harness did not write: {exc}") from exc
        if reply.get("nonce") != nonce or reply.get("op") != op:
            raise ForgedReply(f"{CHANNEL_TAG} a reply without the request's nonce arrived (forged message)")
        return reply, blobs

    def death(self) -> tuple[str, str]:
        """(outcome, reason) once the runner is gone."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        if code == -signal.SIGXFSZ:
            return "resource_limit", "the candidate wrote a file larger than the file size limit (SIGXFSZ)"
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        return "crashed", f"the candidate's process {how} without answering"

    def kill(self) -> None:
        """Stop a runner that will get no candidate (a warm judge's, started with other settings)."""
        self.process.kill()
        self.process.wait()

    def close(self) -> None:
        try:
            channel.write_frame(self.request_write, {"op": "quit", "nonce": ""})
        except OSError:
            pass


def outputs_from(reply: dict, blobs: list[bytes], device) -> tuple[object, str]:
    """Rebuild the runner's outputs; a subclass or a non-tensor is described, not rebuilt."""
    values, cursor = [], 0
    for meta in reply["outputs"]:
        if meta.get("kind") == "tensor":
            if meta.get("device", device.type) != device.type:
                return None, f"output is on {meta.get('device')}, expected {device.type}"
            values.append(channel.blob_to_tensor(meta, blobs[cursor], device))
            cursor += 1
        elif meta.get("kind") == "subclass":
            return None, f"output is a tensor subclass ({meta.get('type')}); a plain torch.Tensor is required"
        else:
            values.append(meta.get("value"))
    return (tuple(values) if reply.get("nested") else values[0]), ""
