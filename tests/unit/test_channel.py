"""The result channel's signatures and the runner channel's frames: forged, malformed or
truncated messages are refused, real ones round-trip (tensors included)."""

from __future__ import annotations

import json
import os

import pytest
import torch

from cudarl.tester.sandbox import channel


def test_signed_messages_verify_and_any_change_breaks_them():
    key = os.urandom(32)
    message = channel.sign({"event": "result", "outcome": "passed", "speedup": 3.0}, key)
    assert channel.verify(message, key)
    assert not channel.verify({**message, "speedup": 30.0}, key)
    assert not channel.verify(message, os.urandom(32))
    assert not channel.verify({"event": "result", "outcome": "passed"}, key)


def test_frames_round_trip_headers_and_tensors():
    read, write = os.pipe()
    tensor = torch.randn(3, 5).to(torch.bfloat16)
    meta, raw = channel.tensor_to_blob(tensor)
    channel.write_frame(write, {"op": "trial", "outputs": [meta]}, [raw])
    header, blobs = channel.read_frame(read)
    assert header["op"] == "trial" and header["blobs"] == [len(raw)]
    assert torch.equal(channel.blob_to_tensor(header["outputs"][0], blobs[0], "cpu"), tensor)
    os.close(read), os.close(write)


def test_the_header_is_handed_over_before_the_blobs_cross_and_big_blobs_arrive_whole():
    """A judge gives up its GPU turn at the header (``on_header``); the outputs, larger than a
    pipe holds, are then still on their way, and arrive as one writable buffer each."""
    import threading

    read, write = os.pipe()
    tensor = torch.arange(3 << 20, dtype=torch.float32)  # 12 MiB, far more than the pipe buffer
    meta, raw = channel.tensor_to_blob(tensor)
    assert isinstance(raw, memoryview) and raw.nbytes == tensor.numel() * 4  # no second host copy
    writer = threading.Thread(target=channel.write_frame, args=(write, {"op": "trial", "outputs": [meta]}, [raw, b"x"]))
    writer.start()
    seen = []
    header, blobs = channel.read_frame(read, on_header=lambda h: seen.append((h["op"], writer.is_alive())))
    writer.join(timeout=30)
    assert seen == [("trial", True)] and header["blobs"] == [raw.nbytes, 1]
    assert not memoryview(blobs[0]).readonly and bytes(blobs[1]) == b"x"
    assert torch.equal(channel.blob_to_tensor(header["outputs"][0], blobs[0], "cpu"), tensor)
    os.close(read), os.close(write)


@pytest.mark.parametrize("garbage", [
    b'{"event": "result", "outcome": "passed"}\n' + b" " * 64,
    b"CRL1" + (1 << 40).to_bytes(8, "little"),
    b"CRL1" + (5).to_bytes(8, "little") + b"nope!",
])
def test_malformed_frames_are_refused(garbage):
    read, write = os.pipe()
    os.write(write, garbage)
    with pytest.raises(channel.ChannelError):
        channel.read_frame(read)
    os.close(read), os.close(write)


def test_a_closed_channel_is_end_of_file_not_a_frame():
    read, write = os.pipe()
    os.write(write, b"CRL1")
    os.close(write)
    with pytest.raises(EOFError):
        channel.read_frame(read)
    os.close(read)


def test_a_huge_blob_announced_and_never_sent_costs_nothing_and_is_an_error():
    """The buffer's pages exist only once bytes arrive: 48 GiB announced, then the peer hangs up."""
    import resource

    read, write = os.pipe()
    body = json.dumps({"op": "trial", "nonce": "n", "blobs": [48 << 30]}).encode()
    os.write(write, b"CRL1" + len(body).to_bytes(8, "little") + body)
    os.close(write)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises((EOFError, channel.ChannelError)):
        channel.read_frame(read)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 1 << 20  # KiB: under 1 GiB more
    os.close(read)


def test_a_tensor_whose_bytes_do_not_match_its_shape_is_refused():
    with pytest.raises(channel.ChannelError):
        channel.blob_to_tensor({"shape": [4], "dtype": "float32"}, b"\0" * 8, "cpu")

