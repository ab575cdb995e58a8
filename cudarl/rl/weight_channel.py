"""Weights from the update workers' rank 0 to the policy actor over a two-member torch process
group: NCCL when both sit on GPUs (device to device, over NVLink or PCIe), gloo on CPUs.

Why: through the object store, every sync copies the weights to host memory, into the store,
out of it in the policy's process and back to a GPU; across nodes the store also sends them over
its own transfer. A collective moves them once, GPU to GPU. The two members are not part of Ray
Train's process group (the policy actor is no Train worker), so the group is made directly from
torch's backend classes over a ``TCPStore`` the driver serves, the way RL trainers join trainer
and rollout processes; Ray Train's own group is untouched.

The wire format: the sender packs its tensors, in the manifest's order, as raw bytes into buckets
of at most ``BUCKET_BYTES`` (one broadcast each; a tensor larger than a bucket goes alone); the
receiver, told the manifest beforehand through Ray, allocates the same buckets and views them back
as the named tensors. Any dtype travels, bit for bit.

Covered: the address (``open_store``, in the driver), the manifest, send and receive, a check
that both ends are on different GPUs (NCCL refuses two members on one device). Not covered: a
peer that dies during a transfer (the survivor's collective fails at the group's timeout; the run
stops and ``--resume`` continues it), more than one receiver.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

BUCKET_BYTES = 256 * 2**20
"""Largest broadcast: big enough that per-call latency does not matter, small enough that the
staging buffers cost little GPU memory."""
ALIGN = 16
"""Each tensor starts at a multiple of this many bytes in its bucket (a view as a wider dtype
needs its offset aligned)."""


@dataclass(frozen=True)
class ChannelAddress:
    """Where the two members meet: the driver's ``TCPStore`` and a key unique to the pairing (a
    restarted policy gets a new key, so it never joins a group its predecessor half-used)."""

    host: str
    port: int
    key: str
    backend: Literal["nccl", "gloo"]
    timeout_s: float = 600.0


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of a transfer, as the receiver allocates it."""

    group: str  # what the tensor belongs to: an adapter's name, or MODEL_GROUP
    name: str
    shape: tuple[int, ...]
    dtype: str  # torch's name without the prefix: "bfloat16"

    @property
    def nbytes(self) -> int:
        import math

        import torch

        return math.prod(self.shape) * getattr(torch, self.dtype).itemsize

    @property
    def slot(self) -> int:
        """Its bytes in a bucket, padded to ``ALIGN``."""
        return -(-self.nbytes // ALIGN) * ALIGN


Manifest = tuple[TensorSpec, ...]

MODEL_GROUP = "model"
"""The group name of the whole model's weights (full fine-tuning); an adapter's group is its name."""


def group_of(adapter: str | None) -> str:
    """The channel group of ``adapter`` (None: the whole model)."""
    return adapter or MODEL_GROUP


def adapter_of(group: str) -> str | None:
    """The adapter a channel group holds (None: the whole model)."""
    return None if group == MODEL_GROUP else group


def manifest_of(groups: Mapping[str, Mapping[str, object]]) -> Manifest:
    """The manifest of ``{group: {name: tensor}}`` in iteration order (what the sender sends)."""
    return tuple(TensorSpec(group, name, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."))
                 for group, tensors in groups.items() for name, tensor in tensors.items())


def buckets(manifest: Manifest, limit: int = BUCKET_BYTES) -> list[list[int]]:
    """Indices of ``manifest`` grouped into consecutive buckets of at most ``limit`` bytes."""
    result: list[list[int]] = []
    size = 0
    for index, spec in enumerate(manifest):
        if not result or size + spec.slot > limit:
            result.append([])
            size = 0
        result[-1].append(index)
        size += spec.slot
    return result


def open_store(timeout_s: float = 600.0):
    """The meeting point, served from this (the driver's) process: the store and its host and port.
    Keep the store alive as long as the channel may be (re)opened."""
    import ray
    from torch.distributed import TCPStore

    host = ray.util.get_node_ip_address()
    store = TCPStore(host, 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=timeout_s))
    return store, host, store.port


class WeightChannel:
    """One end of the pairing: rank 0 sends (the update worker), rank 1 receives (the policy)."""

    def __init__(self, address: ChannelAddress, rank: int, device: str, bucket_bytes: int = BUCKET_BYTES) -> None:
        import torch.distributed as dist

        if rank not in (0, 1):
            raise ValueError(f"a weight channel has two members, 0 (sender) and 1 (receiver); got rank {rank}")
        self.address, self.rank, self.device, self.bucket_bytes = address, rank, device, bucket_bytes
        timeout = timedelta(seconds=address.timeout_s)
        store = dist.TCPStore(address.host, address.port, is_master=False, timeout=timeout)
        prefixed = dist.PrefixStore(f"cudarl-weights/{address.key}/", store)
        print(f"weight channel {address.key}: {('sender', 'receiver')[rank]} joining over {address.backend} "
              f"on {device} (store {address.host}:{address.port})", file=sys.stderr, flush=True)
        if address.backend == "nccl":
            self.group = dist.ProcessGroupNCCL(prefixed, rank, 2, timeout)
        else:
            self.group = dist.ProcessGroupGloo(prefixed, rank, 2, timeout)

    def _broadcast(self, buffer) -> None:
        import torch.distributed as dist

        options = dist.BroadcastOptions()
        options.rootRank = 0
        self.group.broadcast([buffer], options).wait()

    def send(self, groups: Mapping[str, Mapping[str, object]]) -> Manifest:
        """Broadcast ``{group: {name: tensor}}`` (any device) to the receiver; its manifest, which
        the receiver must have been given (``manifest_of`` computes it before the send)."""
        import torch

        manifest = manifest_of(groups)
        flat = [tensor for tensors in groups.values() for tensor in tensors.values()]
        for indices in buckets(manifest, self.bucket_bytes):
            bucket = torch.zeros(sum(manifest[i].slot for i in indices), dtype=torch.uint8, device=self.device)
            offset = 0
            for i in indices:
                raw = flat[i].detach().contiguous().reshape(-1).view(torch.uint8)
                bucket[offset:offset + raw.numel()].copy_(raw, non_blocking=False)
                offset += manifest[i].slot
            self._broadcast(bucket)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return manifest

    def receive(self, manifest: Manifest) -> dict[str, dict[str, object]]:
        """The tensors the sender broadcasts for ``manifest``, on this member's device, by group."""
        import torch

        result: dict[str, dict[str, object]] = {}
        for indices in buckets(manifest, self.bucket_bytes):
            specs = [manifest[i] for i in indices]
            bucket = torch.empty(sum(spec.slot for spec in specs), dtype=torch.uint8, device=self.device)
            self._broadcast(bucket)
            offset = 0
            for spec in specs:
                raw = bucket[offset:offset + spec.nbytes]
                result.setdefault(spec.group, {})[spec.name] = raw.view(getattr(torch, spec.dtype)).reshape(spec.shape)
                offset += spec.slot
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return result

    def close(self) -> None:
        """Release the group's communicator (NCCL's, if one was made)."""
        shutdown = getattr(self.group, "shutdown", None)
        if shutdown is not None:
            try:
                shutdown()
            except RuntimeError:  # never used: nothing to release
                pass


def device_uuid() -> str | None:
    """The UUID of this process's current GPU (None without one): two members with the same UUID
    share a GPU, which NCCL refuses."""
    import torch

    if not torch.cuda.is_available():
        return None
    return str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
