"""Settings of the RL phase: the reward (``[reward]``) and the algorithm (``[algorithm]``: returns,
advantages, policy loss). Every weight of the reward is here, with the reason for its default."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from cudarl.config_base import _Section


class RewardConfig(_Section):
    """A turn's reward from its verdict (``cudarl.reward``). ``gated``: nothing is earned unless
    the candidate compiled and passed; then ``correct`` plus a log-scaled, clipped speedup term
    and the optional terms. ``five_part``: the seeds' weighted sum (compile 30%, correctness 30%,
    performance 25%, efficiency 10%, quality 5%), each part in [0, 1]."""

    preset: Literal["gated", "five_part"] = "gated"
    """Which reward: ``gated`` (the weights below) or ``five_part`` (fixed weights, the terms'
    definitions in ``cudarl.reward``; the failure rewards below still apply to failures)."""
    correct: float = Field(default=1.0, gt=0, le=10)
    """Base reward of a correct candidate (passed, or correct with timing off). Every reward
    setting is bounded to [-10, 10]: rewards far from the advantages' scale destabilize updates."""
    speedup_weight: float = Field(default=0.5, ge=0)
    """Weight of ``log2(speedup)`` (clipped to the range below) added to a correct candidate's reward."""
    speedup_log2_min: float = Field(default=-1.0, ge=-10, le=0)
    """Lower clip of ``log2(speedup)``: a kernel twice as slow as the reference or slower counts as
    twice as slow, so a slow correct kernel still beats a failing one (checked below)."""
    speedup_log2_max: float = Field(default=3.0, ge=0)
    """Upper clip of ``log2(speedup)`` (8x by default): one lucky timing cannot dominate a group."""
    coverage_weight: float = Field(default=0.0, ge=0)
    """Weight of the share of forward's GPU time spent in the candidate's own kernels (0 to 1):
    rewards doing the work in CUDA rather than around library calls. Off by default."""
    spill_penalty: float = Field(default=0.0, ge=0)
    """Subtracted from a correct candidate's reward when any of its kernels spills registers."""
    format_error: float = Field(default=0.0, ge=-10, le=10)
    """Reward of an answer with no usable candidate (negative: a penalty)."""
    compile_failure: float = Field(default=0.0, ge=-10, le=10)
    """Reward of a candidate that did not parse, compile, or load."""
    incorrect: float = Field(default=0.0, ge=-10, le=10)
    """Reward of a candidate that ran but was wrong, crashed, hung or exceeded a limit."""
    rejected: float = Field(default=0.0, ge=-10, le=10)
    """Reward of a candidate a hardening rule refused (a reward hack or a forbidden construct)."""

    @model_validator(mode="after")
    def _correct_beats_failure(self) -> Self:
        if self.preset != "gated":
            return self
        worst_correct = self.correct + self.speedup_weight * self.speedup_log2_min - self.spill_penalty
        best_failure = max(self.format_error, self.compile_failure, self.incorrect, self.rejected)
        if worst_correct <= best_failure:
            raise ValueError(f"a correct but slow kernel would earn {worst_correct:g}, no more than a failing "
                             f"one ({best_failure:g}): raise `correct` or lower the failure rewards")
        return self


class AlgorithmConfig(_Section):
    """Returns, advantages and the policy loss (``cudarl.rl``), on verl's ``core_algos``."""

    gamma: float = Field(default=0.4, ge=0, le=1)
    """Discount of later turns' rewards in a turn's return (0.4 as in Kevin-32B: a turn is
    credited with some of what the refinements it enabled earned)."""
    advantage: Literal["grpo", "grpo_unscaled", "rloo", "trloo"] = "grpo"
    """grpo: return minus the group mean, over the group's std (all turns of the rollouts of one
    task); grpo_unscaled: the same without the std (Dr. GRPO); rloo: return minus the mean of the
    group's other samples; trloo: rloo within each turn index (a turn against the same turn of
    the other rollouts of the task, as Dr. Kernel's TRLOO)."""
    policy_loss: Literal["vanilla", "gspo", "geo_mean", "cispo", "clip_cov", "kl_cov"] = "vanilla"
    """verl's policy loss by its registered name: ``vanilla`` is PPO's clipped objective; the
    others (sequence-level GSPO, geometric-mean GMPO, CISPO, Clip-Cov, KL-Cov) take their extra
    settings from verl's defaults."""
    clip_ratio_low: float = Field(default=0.2, gt=0, lt=1)
    """PPO clip below 1: the ratio's lower bound is 1 - this."""
    clip_ratio_high: float = Field(default=0.28, gt=0)
    """PPO clip above 1 (clip-higher, 0.28 as in DAPO: rare good tokens can grow faster)."""
    clip_ratio_c: float = Field(default=3.0, gt=1)
    """Dual-clip bound on the loss of negative-advantage tokens."""
    loss_aggregation: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"] = "token-mean"
    """How token losses become the batch loss; token-mean is normalized by the global token count
    over all data-parallel ranks, so it is the same loss on any number of ranks."""
    kl_coef: float = Field(default=0.0, ge=0)
    """Weight of the KL penalty to the reference policy (the base model with adapters off); 0: off."""
    kl_type: Literal["kl", "abs", "mse", "low_var_kl", "k3"] = "low_var_kl"
    """verl's KL estimator for the penalty."""
    max_grad_norm: float = Field(default=1.0, gt=0)
    """Gradients are clipped to this global norm before each optimizer step."""


class TrainConfig(_Section):
    """The RL run (``cudarl train``): model, batch shape, episodes, the update workers."""

    model: str = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    """Hub id or local folder of the base model (tokenizer included); both roles' adapters sit on it."""
    engine: Literal["auto", "hf", "vllm"] = "auto"
    """Rollout engine (auto: vLLM on a GPU when installed, else transformers)."""
    steps: int = Field(default=100, ge=1)
    """RL steps to run (a resumed run continues up to this many)."""
    tasks_per_step: int = Field(default=4, ge=1)
    """Tasks drawn from the curriculum per step."""
    group_size: int = Field(default=8, ge=2)
    """Episodes per task per step: the group its advantages compare within."""
    optimizer_turns: int = Field(default=2, ge=0, le=64)
    """Optimizer turns after each generator turn."""
    max_new_tokens: int = Field(default=2048, ge=1)
    """Longest answer per turn, in tokens."""
    temperature: float = Field(default=1.0, gt=0, le=10)
    """Sampling temperature of the rollouts; the update takes log-probs under the same one (0,
    greedy, has no log-probs to learn from and is refused)."""
    target_speedup: float | None = Field(default=None, gt=0)
    """End an episode once a correct candidate reaches this speedup (None: every turn runs)."""
    full_finetune: bool = False
    """Train every weight of one policy instead of a LoRA adapter per role."""
    init_adapters: str | None = None
    """The warm start's output folder (``cudarl sft --out``): its ``generator/`` and ``optimizer/``
    adapters start the run as weights version 1, in the update workers and in the engine (checked
    on a probe). A role without a folder there starts fresh. None: both start fresh (version 0).
    Their LoRA rank and alpha must equal ``lora_rank`` and ``lora_alpha``."""
    lora_rank: int = Field(default=16, ge=1, le=1024)
    """Rank of each role's adapter (the warm start's adapters must match)."""
    lora_alpha: int = Field(default=32, ge=1)
    """LoRA scaling numerator (scale = alpha / rank)."""
    learning_rate: float = Field(default=1e-5, gt=0, le=1)
    """AdamW learning rate of the trained weights."""
    micro_batch: int = Field(default=4, ge=1)
    """Samples per forward/backward on an update worker."""
    ranks: int = Field(default=1, ge=1)
    """Update workers (data-parallel FSDP2 ranks)."""
    gpus_per_rank: float = Field(default=0.0, ge=0, le=1)
    """GPU share of each update worker (0: CPU; below 1 on one GPU shared with policies and bench workers)."""
    dtype: Literal["float32", "bfloat16"] = "float32"
    """Parameter dtype of the update workers and the engine."""
    policy_gpu_share: float | None = Field(default=None, ge=0, le=1)
    """GPU share of the policy actor that holds the rollout engine (None: 0.3 when the update
    workers use GPUs, else 0 and the engine runs on the CPU). Ray places the actor, so under
    ``ray job submit`` the engine runs on a GPU node, not on the head node with the driver."""
    weight_sync: Literal["auto", "object_store", "collective"] = "auto"
    """How each step's weights reach the policy actor: "object_store" (the update worker puts them
    in Ray's object store, the policy takes them from there), "collective" (a two-member process
    group between the update workers' rank 0 and the policy: NCCL GPU to GPU, gloo on CPUs; the
    two must not share a GPU), or "auto": collective when both sit on GPUs and not on the same one,
    else the object store. The object store keeps a copy either way (checkpoints, a restarted policy)."""
    policy_cpus: float = Field(default=1.0, ge=0)
    """CPUs reserved for the policy actor."""
    policy_timeout_s: float = Field(default=1800.0, gt=0)
    """Longest wait on the policy actor (its start, or one call such as a step's generation); a
    policy that does not answer in time is treated like a dead one (the step's rollout is tried again)."""
    checkpoint_every: int = Field(default=10, ge=1)
    """Adapters and the run's state are written every this many steps."""
    seed: int = Field(default=0, ge=0)
    """Seed of the rollouts' sampling (step by step) and of the task order."""
    vllm_gpu_memory: float = Field(default=0.4, ge=0.05, le=0.98)
    """Share of the GPU the vLLM engine takes (weights and KV cache); the rest is for the update
    workers and the bench workers on the same GPU."""
    vllm_enforce_eager: bool = False
    """Start vLLM without CUDA graphs or compilation (seconds instead of minutes; slower decoding)."""
    overlap: bool = False
    """Roll out step n+1 while step n's update runs (one step off-policy: those samples come from
    the weights before step n's update, and their version lag of 1 is logged). The step before a
    checkpoint never overlaps, so a resumed run still matches an uninterrupted one."""
    step_retries: int = Field(default=2, ge=0, le=10)
    """Times a step's rollout is tried again after its judge or engine failed (a tester pool or
    policy worker that died); the curriculum is put back as it was before the failed try."""
    tensorboard: bool = False
    """Also write each step's scalars as TensorBoard events under ``<out>/tensorboard``."""
    wandb_project: str | None = None
    """Also log each step's scalars to this Weights & Biases project (needs ``wandb`` and its login)."""

    @property
    def policy_gpu(self) -> float:
        """The policy actor's GPU share, resolved."""
        if self.policy_gpu_share is not None:
            return self.policy_gpu_share
        return 0.3 if self.gpus_per_rank > 0 else 0.0

    @model_validator(mode="after")
    def _seeds_stay_apart(self) -> Self:
        """Each step's sampling seeds span turns x episodes; past 65,536 they would reach the next step's."""
        draws = (self.optimizer_turns + 1) * self.tasks_per_step * self.group_size
        if draws > 65_536:
            raise ValueError(f"(optimizer_turns + 1) x tasks_per_step x group_size is {draws}; at most 65,536 "
                             "answers per step keep every answer's sampling seed its own")
        return self
