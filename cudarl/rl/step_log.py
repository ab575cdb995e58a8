"""Where each RL step's record goes: ``steps.jsonl`` (always, one JSON object per line, written as
the step ends), Prometheus gauges through ``cudarl.metrics`` (when this process is connected to
Ray, whose metrics agent serves them), TensorBoard events under ``<out>/tensorboard`` and Weights
& Biases (each when configured). One flat set of scalar names (``step_scalars``) feeds the last
two, so a curve has the same name in both.

Covered: the record, its scalars, the four sinks. Not covered: what the record holds (the
driver fills it) and dashboards (``dashboards/``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class StepRecord:
    """One line of ``steps.jsonl``."""

    step: int
    tier: str
    weights_version: int  # after this step's update
    stats: dict  # StepStats
    update: dict  # the update workers' metrics
    seconds: dict  # rollout (generation), judge, update, sync, step (the whole step, wall time)
    sync_errors: dict  # adapter -> mean probe error
    overlapped: bool = False  # rolled out while the previous step's update ran
    retries: int = 0  # rollout tries that failed before this one
    sync_via: str = "object_store"  # how the weights reached the engine: "object_store", "nccl" or "gloo"


def step_scalars(record: StepRecord, tier_level: int) -> dict[str, float]:
    """The record's numbers under flat names (``reward/mean``, ``rate/pass/<tier>``, ``seconds/update``)."""
    stats = record.stats
    scalars = {"reward/mean": stats["mean_reward"], "rate/pass": stats["pass_rate"],
               "rate/compile": stats["compile_rate"], "turns/mean": stats["mean_turns"],
               "tokens/response": float(stats["response_tokens"]), "version/weights": float(record.weights_version),
               "version/lag": float(stats["version_lag"]), "tier/level": float(tier_level),
               "retries": float(record.retries)}
    for name in ("mean", "median"):
        if stats[f"{name}_speedup"] is not None:
            scalars[f"speedup/{name}"] = stats[f"{name}_speedup"]
    for tier, rates in stats.get("by_tier", {}).items():
        scalars[f"rate/pass/{tier}"] = rates["pass_rate"]
        scalars[f"rate/compile/{tier}"] = rates["compile_rate"]
    for phase, seconds in record.seconds.items():
        scalars[f"seconds/{phase}"] = seconds
    for name, value in record.update.items():
        if isinstance(value, int | float):
            scalars[f"update/{name}"] = float(value)
    return scalars


class StepLog:
    """Writes each step's record to every configured sink; ``close`` flushes them."""

    def __init__(self, out: Path, tiers: list[str], tensorboard: bool = False, wandb_project: str | None = None,
                 run_name: str | None = None) -> None:
        self.path = out / "steps.jsonl"
        self.tiers = tiers
        self.run_name = run_name or out.resolve().name
        self._metrics = self._writer = self._wandb = None
        import ray

        if ray.is_initialized():
            from cudarl.metrics import TrainMetrics

            self._metrics = TrainMetrics(self.run_name)
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(out / "tensorboard"))
        if wandb_project:
            try:
                import wandb
            except ImportError as exc:
                raise ValueError("train.wandb_project is set but wandb is not installed (pip install wandb)") from exc
            self._wandb = wandb.init(project=wandb_project, name=self.run_name, dir=str(out), resume="allow",
                                     id=f"{self.run_name}-{hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:8]}")

    def write(self, record: StepRecord) -> None:
        with self.path.open("a") as log:  # first, before any other sink can fail
            log.write(json.dumps(asdict(record)) + "\n")
        level = self.tiers.index(record.tier) if record.tier in self.tiers else -1
        scalars = step_scalars(record, level)
        if self._metrics is not None:
            self._record_metrics(record, scalars)
        if self._writer is not None:
            for name, value in scalars.items():
                self._writer.add_scalar(name, value, global_step=record.step + 1)
            self._writer.flush()
        if self._wandb is not None:
            self._wandb.log(scalars, step=record.step + 1)

    def _record_metrics(self, record: StepRecord, scalars: dict[str, float]) -> None:
        metrics = self._metrics
        metrics.step.set(record.step + 1)
        metrics.reward.set(scalars["reward/mean"])
        metrics.rate.set(scalars["rate/pass"], tags={"kind": "pass", "tier": "all"})
        metrics.rate.set(scalars["rate/compile"], tags={"kind": "compile", "tier": "all"})
        for tier, rates in record.stats.get("by_tier", {}).items():
            metrics.rate.set(rates["pass_rate"], tags={"kind": "pass", "tier": tier})
            metrics.rate.set(rates["compile_rate"], tags={"kind": "compile", "tier": tier})
        for stat in ("mean", "median"):
            if f"speedup/{stat}" in scalars:
                metrics.speedup.set(scalars[f"speedup/{stat}"], tags={"stat": stat})
        metrics.turns.set(scalars["turns/mean"])
        metrics.tokens.set(scalars["tokens/response"])
        for phase, seconds in record.seconds.items():
            metrics.seconds.set(seconds, tags={"phase": phase})
        metrics.tier.set(scalars["tier/level"])
        metrics.version.set(record.weights_version)
        metrics.version_lag.set(scalars["version/lag"])

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._wandb is not None:
            self._wandb.finish()
