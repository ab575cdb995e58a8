"""Weight-sync time from an update worker to the policy actor on another GPU: through Ray's
object store (what ``train.weight_sync = "object_store"`` does) against cudarl's NCCL weight
channel (``cudarl.rl.weight_channel``), for both roles' LoRA adapters and for the whole
Qwen2.5-Coder-1.5B-shaped model, side by side in one run:

    uv run python benchmarks/weight_sync.py [--repeats 5]
    uv run python benchmarks/weight_sync.py --tiny          # a smoke run on CPUs (gloo, a tiny model)

Two Ray actors, one GPU each (Ray sets each one's visible GPU, as for the run's update worker and
policy). The sender holds the tensors as the update worker exports them (full tensors in host
memory); per arm and payload, the wall time from the driver's request to the receiver holding
every tensor on its GPU:
- object store: the sender puts them in the store, the receiver gets them and copies them to its GPU;
- channel: the sender packs them into buckets on its GPU and broadcasts, the receiver unpacks;
- channel, GPU-resident: the same from tensors already on the sender's GPU (what a trainer that
  exported without the host copy would pay).
The first repeat of each arm also opens the NCCL communicator and is reported apart; the table
shows the median of the others. Prints a table; writes ``benchmarks/results/weight_sync-<date>-<gpu>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from rollout import QWEN_1_5B, TINY, build_model
from run_metadata import ROOT, run_metadata

ROLES = ("generator", "optimizer")


def payloads(shape: dict) -> dict[str, dict[str, dict]]:
    """``{payload: {group: {name: tensor}}}``: both roles' rank-16 adapters, and the whole model (bf16, CPU)."""
    import torch
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

    from cudarl.rollout.engine import LoraSettings

    model = build_model(shape, "cpu", torch.bfloat16)
    whole = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    settings = LoraSettings(rank=16, alpha=32)
    lora = LoraConfig(r=settings.rank, lora_alpha=settings.alpha, target_modules=list(settings.target_modules))
    peft_model = get_peft_model(model, lora, adapter_name=ROLES[0])
    peft_model.add_adapter(ROLES[1], lora)
    adapters = {role: {k: v.detach().clone()
                       for k, v in get_peft_model_state_dict(peft_model, adapter_name=role).items()} for role in ROLES}
    return {"adapters": adapters, "model": {"model": whole}}


class End:
    """One end (sender or receiver) in its own actor."""

    def __init__(self, device: str) -> None:
        self.device, self.channels, self.held = device, {}, {}

    def hold(self, groups: dict, on_device: bool) -> int:
        self.held = {g: {n: (t.to(self.device) if on_device else t) for n, t in ts.items()} for g, ts in groups.items()}
        return sum(t.numel() * t.element_size() for ts in self.held.values() for t in ts.values())

    def put(self):
        import ray

        return [ray.put(self.held)]  # in a list: the receiver gets the reference, not the value

    def take(self, refs) -> float:
        import ray
        import torch

        groups = ray.get(refs[0])
        moved = {g: {n: t.to(self.device) for n, t in ts.items()} for g, ts in groups.items()}
        if self.device == "cuda":
            torch.cuda.synchronize()
        return float(sum(t.numel() for ts in moved.values() for t in ts.values()))

    def _channel(self, address, rank: int):
        from cudarl.rl.weight_channel import WeightChannel

        if address.key not in self.channels:
            self.channels[address.key] = WeightChannel(address, rank, self.device)
        return self.channels[address.key]

    def send(self, address) -> None:
        self._channel(address, 0).send(self.held)

    def receive(self, address, manifest) -> float:
        groups = self._channel(address, 1).receive(manifest)
        return float(sum(t.numel() for ts in groups.values() for t in ts.values()))


def time_arm(arm: str, sender, receiver, groups: dict, address, repeats: int) -> list[float]:
    import ray

    from cudarl.rl.weight_channel import manifest_of

    ray.get(sender.hold.remote(groups, arm == "channel, GPU-resident"))
    manifest = manifest_of(groups)
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        if arm == "object store":
            ray.get(receiver.take.remote(ray.get(sender.put.remote())))
        else:
            done = receiver.receive.remote(address, manifest)
            ray.get([sender.send.remote(address), done])
        seconds.append(time.perf_counter() - started)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="a tiny model on CPUs over gloo (a smoke run)")
    parser.add_argument("--commit", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import ray
    import torch

    from cudarl.rl.weight_channel import open_store

    gpus = 0 if args.tiny else torch.cuda.device_count()
    if not args.tiny and gpus < 2:
        print(f"needs 2 GPUs (this machine has {gpus}); --tiny runs on CPUs")
        return 2
    device, backend = ("cuda", "nccl") if gpus else ("cpu", "gloo")
    ray.init(address="local", num_cpus=4, num_gpus=gpus, include_dashboard=False, logging_level="ERROR")
    rows = []
    try:
        remote = ray.remote(num_cpus=1, num_gpus=1 if gpus else 0)(End)
        sender, receiver = remote.remote(device), remote.remote(device)
        store, host, port = open_store()
        from cudarl.rl.weight_channel import ChannelAddress

        for payload, groups in payloads(TINY if args.tiny else QWEN_1_5B).items():
            size = sum(t.numel() * t.element_size() for ts in groups.values() for t in ts.values())
            for index, arm in enumerate(("object store", "channel", "channel, GPU-resident")):
                address = ChannelAddress(host, port, f"{payload}-{index}", backend)
                seconds = time_arm(arm, sender, receiver, groups, address, args.repeats)
                rows.append({"payload": payload, "arm": arm, "bytes": size, "first_s": seconds[0],
                             "median_s": statistics.median(seconds[1:] or seconds), "seconds": seconds})
                print(f"{payload:8s} {arm:22s} {size / 2**20:9.1f} MiB  first {seconds[0]:.3f} s  "
                      f"median {rows[-1]['median_s']:.4f} s", flush=True)
        del store
    finally:
        ray.shutdown()
    print(f"\n{'payload':8s} {'arm':22s} {'MiB':>9s} {'median s':>9s} {'GB/s':>7s} {'vs store':>9s}")
    for row in rows:
        base = next(r["median_s"] for r in rows if r["payload"] == row["payload"] and r["arm"] == "object store")
        row["speedup_vs_object_store"] = base / row["median_s"]
        print(f"{row['payload']:8s} {row['arm']:22s} {row['bytes'] / 2**20:9.1f} {row['median_s']:9.4f} "
              f"{row['bytes'] / row['median_s'] / 1e9:7.2f} {row['speedup_vs_object_store']:8.2f}x")
    metadata = run_metadata(args.commit)
    metadata["gpus"] = gpus
    name = (metadata["gpu"] or "cpu").replace(" ", "-")
    out = Path(args.out or ROOT / "benchmarks" / "results" /
               f"weight_sync-{datetime.now(UTC).date().isoformat()}-{name}.json")
    settings = {"repeats": args.repeats, "model_shape": TINY if args.tiny else QWEN_1_5B, "lora_rank": 16,
                "backend": backend}
    out.write_text(json.dumps({"machine": metadata, "settings": settings, "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
