"""The two message channels of an evaluation, and why each can be trusted.

- Judge -> tester: JSON lines on a pipe the tester opened, each signed with HMAC-SHA256 under a
  per-run key that travels on the judge's stdin. Only the judge holds the key and the pipe; the
  candidate's process (the runner) inherits neither, so a message it forged would fail the check
  and is counted, never believed.
- Runner <-> judge: length-prefixed frames (a JSON header, then raw tensor bytes). Each request
  carries a fresh random nonce that the reply must echo. The runner is untrusted: it can only
  send outputs, which the judge compares itself, and timings, which are bounded by the checks
  described in ``judge``. A malformed frame or a wrong nonce is a verdict (``[channel]``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import mmap
import os
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

_MAGIC = b"CRL1"
_PREFIX = struct.Struct("<4sQ")
MAX_HEADER_BYTES = 4 << 20


class ResultWriter:
    """The child's end of the result pipe: JSON lines (``hello``, ``stage``, ``result``), signed
    when a key is given. The compile child writes unsigned, the judge signed."""

    def __init__(self, fd: int, key: bytes | None = None) -> None:
        self.fd, self.key = fd, key

    def send(self, event: str, **fields) -> None:
        message = {"event": event, "t": time.time(), **fields}
        if self.key is not None:
            message = sign(message, self.key)
        os.write(self.fd, (json.dumps(message, default=str) + "\n").encode())

    def finish(self, outcome: str, stage: str, reasons: list[str] | None = None, **fields) -> None:
        """Send the result, kill every process left below (the candidate's), and exit at once
        (skipping atexit and CUDA teardown: a broken context must not hang the exit)."""
        from cudarl.tester.sandbox.isolation import kill_descendants

        self.send("result", outcome=outcome, stage=stage, reasons=reasons or [], **fields)
        kill_descendants()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


class ChannelError(Exception):
    """A frame that is not the harness's: bad magic, bad length, bad JSON, wrong nonce."""


def sign(message: dict, key: bytes) -> dict:
    """``message`` plus a ``mac`` field over its canonical JSON."""
    body = json.dumps(message, sort_keys=True, default=str)
    return {**message, "mac": hmac.new(key, body.encode(), hashlib.sha256).hexdigest()}


def verify(message: dict, key: bytes) -> bool:
    """True when ``message`` carries a valid ``mac`` under ``key``."""
    mac = message.get("mac")
    if not isinstance(mac, str):
        return False
    body = json.dumps({k: v for k, v in message.items() if k != "mac"}, sort_keys=True, default=str)
    expected = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(mac, expected)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, size: int) -> bytes:
    """A small read (prefix, header)."""
    chunks, remaining = [], size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 22))
        if not chunk:
            raise EOFError("the channel closed mid-frame" if chunks or size != remaining else "the channel closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _read_blob(fd: int, size: int) -> mmap.mmap | bytes:
    """``size`` bytes read straight into one writable buffer (outputs are often hundreds of MB: no
    chunk list to join, no second copy). Anonymous memory, whose pages exist only once bytes
    arrive: a peer that announces a huge blob and sends nothing costs no memory."""
    if size == 0:
        return b""
    try:
        buffer = mmap.mmap(-1, size)
    except (OSError, OverflowError) as exc:  # more than the machine would ever commit
        raise ChannelError(f"a blob of {size} bytes was announced: {exc}") from exc
    view, got = memoryview(buffer), 0
    while got < size:
        count = os.readv(fd, [view[got:got + (1 << 24)]])
        if count == 0:
            raise EOFError("the channel closed mid-frame")
        got += count
    return buffer


def write_frame(fd: int, header: dict[str, Any], blobs: list[bytes] = ()) -> None:  # type: ignore[assignment]
    """Send a header (JSON) and raw byte blobs; the header records the blob sizes."""
    body = json.dumps({**header, "blobs": [len(b) for b in blobs]}).encode()
    _write_all(fd, _PREFIX.pack(_MAGIC, len(body)) + body)
    for blob in blobs:
        _write_all(fd, blob)


def read_frame(fd: int, max_blob_bytes: int = 64 << 30,
               on_header: Callable[[dict[str, Any]], None] | None = None
               ) -> tuple[dict[str, Any], list[mmap.mmap | bytes]]:
    """Receive one frame. Raises ``EOFError`` when the peer is gone, ``ChannelError`` when the
    bytes are not a well-formed frame. ``on_header`` runs once the header is in, before the
    blobs: the peer wrote the header only after its outputs were on the host, so its GPU work
    for the request is over (the judge gives up its GPU turn there, not after the transfer). That
    is the peer's word: an untrusted runner could send it early, which gains it no more than work
    left running after a trial already does (``gpu_turns``)."""
    magic, length = _PREFIX.unpack(_read_exact(fd, _PREFIX.size))
    if magic != _MAGIC or length > MAX_HEADER_BYTES:
        raise ChannelError(f"malformed frame (magic {magic!r}, header of {length} bytes)")
    try:
        header = json.loads(_read_exact(fd, length))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ChannelError(f"malformed frame header: {exc}") from exc
    sizes = header.get("blobs") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes) \
            or sum(sizes) > max_blob_bytes:
        raise ChannelError("malformed frame: bad blob sizes")
    if on_header is not None:
        on_header(header)
    return header, [_read_blob(fd, size) for size in sizes]


def tensor_to_blob(tensor) -> tuple[dict, memoryview | bytes]:
    """(meta, raw bytes) of a tensor, copied to the host once (a view of that copy, which it keeps
    alive, not a second copy into ``bytes``)."""
    import torch

    flat = tensor.detach().contiguous().reshape(-1).cpu()
    raw = memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else b""
    return {"shape": list(tensor.shape), "dtype": str(tensor.dtype).removeprefix("torch."),
            "device": tensor.device.type}, raw


def blob_to_tensor(meta: dict, raw: bytes | bytearray | mmap.mmap, device):
    """The tensor ``tensor_to_blob`` described, on ``device``."""
    import torch

    dtype = getattr(torch, meta["dtype"], None)
    if not isinstance(dtype, torch.dtype):
        raise ChannelError(f"unknown dtype {meta['dtype']!r}")
    shape = [int(s) for s in meta["shape"]]
    count = 1
    for size in shape:
        count *= size
    if len(raw) != count * torch.empty((), dtype=dtype).element_size():
        raise ChannelError(f"tensor of shape {shape} and dtype {meta['dtype']} does not match {len(raw)} bytes")
    if count == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    flat = torch.frombuffer(raw if isinstance(raw, (bytearray, mmap.mmap)) else bytearray(raw),
                            dtype=torch.uint8).view(dtype)
    return flat.reshape(shape).to(device)
