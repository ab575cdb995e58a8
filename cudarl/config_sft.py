"""Settings of the warm start (``cudarl sft``), the ``[sft]`` table of a config file."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cudarl.config_base import _Section


class SftConfig(_Section):
    """The warm start (``cudarl sft``): data, LoRA shape and the trainer's settings."""

    base_model: str = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    """Hub id or local folder of the base model; both roles' adapters sit on it."""
    roles: tuple[Literal["generator", "optimizer"], ...] = Field(default=("generator", "optimizer"), min_length=1)
    """Roles to train, one adapter each (written to ``<out>/<role>/``)."""
    suite: bool = True
    """Use the built-in suite's solutions (generator pairs, inline and nvrtc)."""
    archive: str | None = None
    """The kernel archive (folder of parquet files, one parquet file or a hub id); None: not used."""
    jsonl: tuple[str, ...] = ()
    """JSONL files of ready pairs (``task_id``, ``answer``, optional ``role``, ``strategy``, ``previous``)."""
    archive_per_task: int = Field(default=4, ge=0)
    """Generator pairs per archive task: its fastest correct kernels."""
    archive_pairs_per_task: int = Field(default=4, ge=0)
    """Optimizer pairs per archive task: a correct kernel answered by a faster one."""
    max_examples: int | None = Field(default=None, ge=1)
    """At most this many training rows per role (None: all)."""
    held_out_fraction: float = Field(default=0.1, ge=0, lt=1)
    """Share of tasks (not rows) kept out of training for the held-out loss."""
    near_duplicate: float = Field(default=0.9, gt=0, le=1)
    """Two answers of one task whose token 5-grams overlap this much (Jaccard) count as one."""
    max_length: int = Field(default=4096, ge=16)
    """Longest prompt + answer in tokens; longer examples are dropped (counted), never cut."""
    epochs: float = Field(default=2.0, gt=0)
    """Passes over the training rows (``max_steps`` wins when set)."""
    max_steps: int = Field(default=-1, ge=-1)
    """Optimizer steps per role; -1: as many as ``epochs`` gives."""
    batch_size: int = Field(default=4, ge=1)
    """Rows per device per step."""
    gradient_accumulation: int = Field(default=4, ge=1)
    """Steps whose gradients are summed before each optimizer update."""
    learning_rate: float = Field(default=2e-4, gt=0, le=1)
    """Peak learning rate of the adapters."""
    lr_scheduler: Literal["cosine", "linear", "constant", "constant_with_warmup"] = "cosine"
    """Learning-rate schedule after warm-up."""
    warmup_ratio: float = Field(default=0.03, ge=0, lt=1)
    """Share of the steps spent warming the learning rate up (a fraction of all steps)."""
    lora_rank: int = Field(default=16, ge=1, le=1024)
    """LoRA rank (the RL phase's adapters must have the same)."""
    lora_alpha: int = Field(default=32, ge=1)
    """LoRA scaling numerator (scale = alpha / rank)."""
    lora_dropout: float = Field(default=0.05, ge=0, lt=1)
    """Dropout on the adapters' input while training."""
    target_modules: tuple[str, ...] = Field(
        default=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), min_length=1)
    """Modules the adapters wrap (Qwen2/Llama names)."""
    packing: bool = False
    """Pack several rows into one sequence of ``max_length`` (fewer pad tokens, faster)."""
    eval_steps: int = Field(default=50, ge=1)
    """Held-out loss every this many steps (and at the end)."""
    save_steps: int = Field(default=100, ge=1)
    """A checkpoint every this many steps; a new run in the same folder resumes from the last."""
    logging_steps: int = Field(default=10, ge=1)
    """Training loss logged every this many steps (the loss curve's resolution)."""
    seed: int = Field(default=0, ge=0)
    """Seed of the data order, the adapters' initialization and the held-out split."""
    quantization: Literal["auto", "4bit", "none"] = "auto"
    """auto: 4-bit NF4 base weights (double quantization, bf16 compute) on CUDA, none on a CPU."""
    gradient_checkpointing: bool = True
    """Recompute activations in the backward pass (less memory, about a third more time); GPU only."""
    fused_loss: Literal["auto", "liger", "none"] = "auto"
    """liger: the Liger kernels through TRL (``use_liger_kernel``), whose fused linear cross-entropy
    never holds the whole (tokens x vocabulary) logits: with a 152k vocabulary those are 2.5 GB
    in fp32 at 4 x 1024 tokens, the same for 4-bit and bf16 weights. auto: liger on CUDA when
    ``liger-kernel`` is installed (the ``gpu`` extra), else none."""
