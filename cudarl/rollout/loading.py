"""Which engine serves a model: the one place that imports an engine's module (late, so a
machine without vLLM never imports it)."""

from __future__ import annotations

from cudarl.rollout.engine import EngineName, RolloutEngine, resolve_engine_name


def load_engine(model: str, engine: EngineName = "auto", dtype: str = "auto", device: str | None = None,
                lora: bool = False, vllm_settings: dict | None = None) -> RolloutEngine:
    """An engine for ``model`` (hub name or local folder). ``lora``: the engine will hold LoRA
    adapters (vLLM must know at start-up). ``vllm_settings``: ``VLLMSettings`` fields."""
    chosen = resolve_engine_name(engine, device)
    if chosen == "vllm":
        from cudarl.rollout.vllm_engine import VLLMEngine, VLLMSettings

        settings = dict(vllm_settings or {})
        if dtype != "auto":
            settings.setdefault("dtype", dtype)
        return VLLMEngine(model, VLLMSettings(**settings), lora=lora)
    from cudarl.rollout.hf import HFEngine

    return HFEngine.from_pretrained(model, dtype=dtype, device=device)
