"""Which engine serves a model: the one place that imports an engine's module (late, so a
machine without vLLM never imports it)."""

from __future__ import annotations

from cudarl.rollout.engine import EngineName, RolloutEngine, resolve_engine_name


def load_engine(model: str, engine: EngineName = "auto", dtype: str = "auto",
                device: str | None = None) -> RolloutEngine:
    """An engine for ``model`` (hub name or local folder). The vLLM engine is not built yet:
    choosing it (or ``auto`` picking it) says so instead of failing later."""
    chosen = resolve_engine_name(engine)
    if chosen == "vllm":
        raise NotImplementedError("the vLLM engine is not built yet (cudarl.rollout.vllm); use engine 'hf'")
    from cudarl.rollout.hf import HFEngine

    return HFEngine.from_pretrained(model, dtype=dtype, device=device)
