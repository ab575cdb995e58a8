"""The weight channel's wire format and both ends over a real gloo group between two real
processes (the NCCL case, GPU to GPU, is in ``tests/gpu/test_rl_multigpu.py``), and the choice of
channel from where both ends sit."""

from __future__ import annotations

import multiprocessing
from datetime import timedelta

import pytest
import torch

from cudarl.rl.weight_channel import ALIGN, ChannelAddress, TensorSpec, WeightChannel, buckets, manifest_of
from cudarl.rl.weight_sync import choose_channel


def _tensors() -> dict[str, dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(3)
    return {"generator": {"a": torch.randn(7, generator=generator).to(torch.bfloat16),  # 14 bytes: padded
                          "b": torch.randn(3, 5, generator=generator)},
            "model": {"c": torch.arange(11, dtype=torch.int64), "d": torch.randn(40, 40, generator=generator)}}


def test_manifest_and_buckets_by_hand():
    manifest = manifest_of(_tensors())
    assert [(s.group, s.name, s.shape, s.dtype) for s in manifest] == [
        ("generator", "a", (7,), "bfloat16"), ("generator", "b", (3, 5), "float32"),
        ("model", "c", (11,), "int64"), ("model", "d", (40, 40), "float32")]
    assert [s.nbytes for s in manifest] == [14, 60, 88, 6400]
    assert [s.slot for s in manifest] == [16, 64, 96, 6400] and all(s.slot % ALIGN == 0 for s in manifest)
    assert buckets(manifest, limit=200) == [[0, 1, 2], [3]]  # 176 bytes, then one larger than the limit alone
    assert buckets(manifest, limit=80) == [[0, 1], [2], [3]]
    assert buckets(manifest) == [[0, 1, 2, 3]]
    assert TensorSpec("g", "x", (), "float16").nbytes == 2


def _end(rank: int, port: int, results) -> None:
    import traceback

    try:
        address = ChannelAddress("127.0.0.1", port, "test", "gloo", timeout_s=60)
        channel = WeightChannel(address, rank, "cpu", bucket_bytes=200)  # three buckets: several broadcasts
        if rank == 0:
            results.put(("sent", channel.send(_tensors())))
        else:
            received = channel.receive(manifest_of(_tensors()))
            # as bytes: a tensor put in the queue would travel as a file descriptor of the child, which exits
            results.put(("received", {g: {n: (str(t.dtype), tuple(t.shape), t.contiguous().view(torch.uint8).numpy()
                                              .tobytes()) for n, t in ts.items()} for g, ts in received.items()}))
        channel.close()
    except BaseException:  # the test shows the child's failure instead of a queue timeout
        results.put((f"error in rank {rank}", traceback.format_exc()))


@pytest.mark.slow
def test_two_processes_move_every_dtype_bit_for_bit():
    store = torch.distributed.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                       timeout=timedelta(seconds=60))
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    ends = [context.Process(target=_end, args=(rank, store.port, results)) for rank in (0, 1)]
    for end in ends:
        end.start()
    answers = dict(results.get(timeout=240) for _ in ends)
    for end in ends:
        end.join(30)
    assert not [k for k in answers if k.startswith("error")], answers
    assert answers["sent"] == manifest_of(_tensors())
    expected = _tensors()
    assert list(answers["received"]) == list(expected)
    for group, tensors in expected.items():
        for name, tensor in tensors.items():
            dtype, shape, raw = answers["received"][group][name]
            assert (dtype, shape) == (str(tensor.dtype), tuple(tensor.shape)), name
            assert raw == tensor.contiguous().view(torch.uint8).numpy().tobytes(), name  # bit for bit


def test_the_channel_is_chosen_from_where_both_ends_sit():
    assert choose_channel("object_store", ["gpu-a"], "gpu-b") is None
    assert choose_channel("auto", [None], None) is None  # CPUs: the object store
    assert choose_channel("auto", ["gpu-a"], "gpu-a") is None  # one GPU shared
    assert choose_channel("auto", ["gpu-a"], None) is None
    assert choose_channel("auto", ["gpu-a"], "gpu-b").backend == "nccl"
    assert choose_channel("collective", [None, None], None).backend == "gloo"
    with pytest.raises(ValueError, match="shares GPU gpu-a with the policy, and NCCL refuses two members on one GPU"):
        choose_channel("collective", ["gpu-a"], "gpu-a")
    with pytest.raises(ValueError, match="one of them has a GPU and the other not"):
        choose_channel("collective", ["gpu-a"], None)


def test_the_sender_is_the_first_update_worker_off_the_policys_gpu():
    two_gpus = ["gpu-b", "gpu-a"]  # rank 0 shares gpu-b with the policy, rank 1 sits with the bench worker
    assert choose_channel("auto", two_gpus, "gpu-b").sender == 1
    assert choose_channel("auto", two_gpus, "gpu-a").sender == 0
    assert choose_channel("auto", two_gpus, "gpu-b", any_rank=False) is None  # a full model: rank 0 alone holds it
    with pytest.raises(ValueError, match="every update worker that could send shares GPU gpu-b"):
        choose_channel("collective", two_gpus, "gpu-b", any_rank=False)


def test_a_third_member_is_refused():
    with pytest.raises(ValueError, match="two members"):
        WeightChannel(ChannelAddress("127.0.0.1", 1, "k", "gloo"), 2, "cpu")
