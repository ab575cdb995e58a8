"""``cudarl sft``: one LoRA adapter per role, trained with TRL's ``SFTTrainer`` on rows laid out as
the RL phase lays them out (``dataset``), QLoRA on CUDA (bitsandbytes NF4, double quantization,
bf16 compute), plain LoRA on a CPU.

Why TRL and not a loop of our own: it does the batching, packing, completion-only labels,
gradient accumulation, schedules, evaluation, checkpoints and resuming that a user expects, and
it is what the field uses. What this module adds: the data (pre-tokenized, so TRL never applies
a template of its own), the quantized load, and the outputs: ``<out>/<role>/`` (a peft adapter
folder the policies load, ``rollout.adapters.read_adapter_folder``), ``<out>/<role>/checkpoints``
(a second run in the same folder resumes from the last), ``<out>/config.json`` (the resolved
settings), ``<out>/data.json`` (what was kept and dropped, by reason), and per role
``loss.json`` and ``loss.png``. Not covered: several GPUs (one process trains), full fine-tuning.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cudarl.config import SftConfig
from cudarl.sft.dataset import SftData, SftRow, build_rows
from cudarl.sft.examples import SftExample, archive_examples, jsonl_examples, suite_examples


@dataclass(frozen=True)
class RoleResult:
    """One role's training: where its adapter is, its step count and losses."""

    role: str
    adapter: Path
    steps: int
    first_loss: float | None
    last_loss: float | None
    held_out_loss: float | None
    resumed_from: str | None


def collect_examples(config: SftConfig, progress=print) -> tuple[list[SftExample], list[str]]:
    """Every example the configured sources give, and one summary line per source."""
    from cudarl.tasks.builtin import load_suite
    from cudarl.tasks.report import LoadReport

    tasks = load_suite()
    examples: list[SftExample] = []
    lines: list[str] = []
    if config.suite:
        found = suite_examples(tasks)
        examples += found
        lines.append(f"suite: {len(found)} examples")
    if config.archive:
        from cudarl.tasks.sakana import load_sakana

        archive_tasks, kernels, report = load_sakana(config.archive)
        tasks = tasks + archive_tasks
        found = archive_examples(archive_tasks, kernels, report, config.archive_per_task, config.archive_pairs_per_task)
        examples += found
        lines.append(report.summary() + f"; {len(found)} examples")
    for path in config.jsonl:
        report = LoadReport(source=path)
        found = jsonl_examples(Path(path), tasks, report)
        examples += found
        lines.append(report.summary())
    for line in lines:
        progress(line)
    if not examples:
        raise ValueError("no training examples: enable the suite or give an archive or JSONL files")
    return examples, lines


def _dataset(rows: list[SftRow]):
    from datasets import Dataset

    return Dataset.from_list([{"input_ids": list(r.prompt_ids) + list(r.completion_ids),
                               "completion_mask": [0] * len(r.prompt_ids) + [1] * len(r.completion_ids)}
                              for r in rows])


def use_liger(config: SftConfig, device: str) -> bool:
    """Whether the fused loss runs (``SftConfig.fused_loss``); asking for it where it cannot run
    is a clear error rather than a silent fallback."""
    import importlib.util

    installed = importlib.util.find_spec("liger_kernel") is not None
    if config.fused_loss == "liger":
        if device != "cuda" or not installed:
            raise ValueError("sft.fused_loss = \"liger\" needs a CUDA GPU and the liger-kernel package "
                             "(pip install 'cudarl[gpu]'); use \"auto\" or \"none\"")
        return True
    return config.fused_loss == "auto" and device == "cuda" and installed


def load_base_model(config: SftConfig, device: str):
    """The base model for training: 4-bit NF4 on CUDA unless ``quantization`` is "none"."""
    import torch
    from transformers import AutoModelForCausalLM

    quantize = config.quantization == "4bit" or (config.quantization == "auto" and device == "cuda")
    if quantize and device != "cuda":
        raise ValueError("4-bit quantization needs a CUDA GPU; set sft.quantization = \"none\" on a CPU")
    kwargs: dict = {"dtype": torch.bfloat16 if device == "cuda" else torch.float32}
    if quantize:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16)
        kwargs["device_map"] = {"": 0}
    model = AutoModelForCausalLM.from_pretrained(config.base_model, **kwargs)
    # No peft ``prepare_model_for_kbit_training`` on the 4-bit model: it casts every weight left
    # unquantized (the embeddings, a tied output head, the norms) to fp32, a fp16-era guard that
    # bf16 compute does not need, and for a 1.5B model with a 152k vocabulary it doubled the
    # embedding's 0.43 GiB. The trainer does the rest of what it did: the base weights are frozen
    # by peft, and input gradients and gradient checkpointing are switched on by TRL's trainer.
    if not quantize and device == "cuda":
        model = model.to(device)
    return model


def _last_checkpoint(folder: Path) -> str | None:
    checkpoints = sorted(folder.glob("checkpoint-*"), key=lambda p: int(p.name.rsplit("-", 1)[-1]))
    return str(checkpoints[-1]) if checkpoints else None


RESUMABLE_CHANGES = ("max_steps", "epochs", "eval_steps", "save_steps", "logging_steps")
"""Settings a resumed run may change. The learning-rate schedule is rebuilt for the new length
(the trainer does not keep it in the checkpoint), so a finished cosine run extended by raising
``max_steps`` warms up from its low end again."""


def _fingerprint(config: SftConfig, rows: list[SftRow]) -> dict:
    """What a checkpoint was made from: every setting but the ones a resumed run may change, and
    a digest of the training rows (another base model, LoRA shape or data must start afresh)."""
    import hashlib

    digest = hashlib.sha256()
    for row in rows:
        digest.update(f"{row.origin}:{len(row.prompt_ids)}:{hash(row.completion_ids)}|".encode())
    settings = {k: v for k, v in config.model_dump(mode="json").items() if k not in RESUMABLE_CHANGES}
    return {"settings": settings, "rows": digest.hexdigest()}


def _check_resumable(checkpoints: Path, fingerprint: dict) -> str | None:
    """The checkpoint to resume from (None: none), after checking it was made from the same
    settings and data; raises ``ValueError`` naming what changed."""
    resume = _last_checkpoint(checkpoints)
    recorded_path = checkpoints / "fingerprint.json"
    if resume is None:
        return None
    recorded = json.loads(recorded_path.read_text()) if recorded_path.is_file() else {}
    changed = sorted(k for k in set(fingerprint["settings"]) | set(recorded.get("settings", {}))
                     if fingerprint["settings"].get(k) != recorded.get("settings", {}).get(k))
    if recorded.get("rows") != fingerprint["rows"]:
        changed.append("the training rows")
    if changed:
        raise ValueError(f"{checkpoints} holds checkpoints made with other settings (changed: {', '.join(changed)}); "
                         "use another output folder or remove them")
    return resume


def train_role(config: SftConfig, role: str, data: SftData, tokenizer, out: Path, device: str,
               progress_bars: bool, callbacks: Sequence = ()) -> RoleResult:
    """Train one role's adapter; resumes from ``<out>/<role>/checkpoints`` when it holds one.
    ``callbacks`` (transformers ``TrainerCallback``s) see every step: a benchmark's progress lines."""
    from peft import LoraConfig
    from trl import SFTConfig, SFTTrainer

    from cudarl._compat import one_gpu_per_process
    from cudarl.sft.curves import write_loss_curves

    folder = out / role
    checkpoints = folder / "checkpoints"
    train = [r for r in data.train if r.role == role][: config.max_examples]
    held_out = [r for r in data.held_out if r.role == role]
    if not train:
        raise ValueError(f"no training rows for the {role} role (see {out / 'data.json'})")
    fingerprint = _fingerprint(config, train)
    resume = _check_resumable(checkpoints, fingerprint)  # before the model is loaded: fail fast
    checkpoints.mkdir(parents=True, exist_ok=True)
    (checkpoints / "fingerprint.json").write_text(json.dumps(fingerprint, indent=1) + "\n")
    arguments = SFTConfig(
        output_dir=str(checkpoints), num_train_epochs=config.epochs, max_steps=config.max_steps,
        per_device_train_batch_size=config.batch_size, per_device_eval_batch_size=config.batch_size,
        gradient_accumulation_steps=config.gradient_accumulation, learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler, warmup_steps=config.warmup_ratio, logging_steps=config.logging_steps,
        eval_strategy="steps" if held_out else "no", eval_steps=config.eval_steps, save_steps=config.save_steps,
        save_total_limit=2, seed=config.seed, data_seed=config.seed, max_length=config.max_length,
        packing=config.packing, completion_only_loss=True, report_to=[], bf16=device == "cuda",
        use_cpu=device != "cuda", gradient_checkpointing=config.gradient_checkpointing and device == "cuda",
        disable_tqdm=not progress_bars, dataloader_num_workers=0, use_liger_kernel=use_liger(config, device))
    one_gpu_per_process(arguments)  # several GPUs visible: train on the first, not nn.DataParallel
    lora = LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=list(config.target_modules), bias="none", task_type="CAUSAL_LM")
    trainer = SFTTrainer(model=load_base_model(config, device), args=arguments, train_dataset=_dataset(train),
                         eval_dataset=_dataset(held_out) if held_out else None, processing_class=tokenizer,
                         peft_config=lora, callbacks=list(callbacks) or None)
    trainer.train(resume_from_checkpoint=resume)
    step = trainer.state.global_step
    if held_out and not any("eval_loss" in e and e.get("step") == step for e in trainer.state.log_history):
        trainer.evaluate()  # the last step's held-out loss, where no scheduled evaluation ran
    trainer.model.save_pretrained(str(folder))
    points = write_loss_curves(trainer.state.log_history, folder / "loss.json", folder / "loss.png",
                               title=f"{role} warm start")
    losses = [loss for _, loss in points["train"]]
    return RoleResult(role=role, adapter=folder, steps=step, first_loss=losses[0] if losses else None,
                      last_loss=losses[-1] if losses else None,
                      held_out_loss=points["held_out"][-1][1] if held_out else None, resumed_from=resume)


def run_sft(config: SftConfig, out: Path, progress_bars: bool | None = None) -> list[RoleResult]:
    """The whole warm start: examples, rows, one adapter per role, and the reports."""
    import torch
    from transformers import AutoTokenizer

    from cudarl.rollout.chat import ChatTokens

    out.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    (out / "config.json").write_text(json.dumps(config.model_dump(mode="json"), indent=2) + "\n")
    tokenizer = AutoTokenizer.from_pretrained(config.base_model)
    examples, sources = collect_examples(config, progress=lambda line: print(line, file=sys.stderr))
    examples = [e for e in examples if e.role in config.roles]
    data = build_rows(examples, ChatTokens(tokenizer), config.max_length, config.held_out_fraction,
                      config.near_duplicate, config.seed)
    statistics = data.statistics() | {"sources": sources, "device": device}
    (out / "data.json").write_text(json.dumps(statistics, indent=2) + "\n")  # before anything can fail in training
    print(f"rows: {statistics['train']['rows']} training, {statistics['held_out']['rows']} held out "
          f"({statistics['held_out']['tasks']} tasks); dropped: {statistics['dropped'] or 'none'}", file=sys.stderr)
    bars = sys.stderr.isatty() if progress_bars is None else progress_bars
    return [train_role(config, role, data, tokenizer, out, device, bars) for role in config.roles]
