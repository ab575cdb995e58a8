"""From examples to training rows: the guard's filter, near-duplicates out, a held-out split by
task, and token ids laid out exactly as the RL phase lays them out.

Why token ids here and not text for the trainer to template: the RL phase renders a prompt with
``rollout.chat.ChatTokens.prompt`` (the model's chat template, assistant turn opened) and the
policy's answer is generated tokens ending with the end-of-sequence token. Training on anything
else (another template call, the answer re-rendered inside the template with its closing tokens)
would teach a slightly different conversation. Each row is ``prompt_ids`` + ``completion_ids``
(the answer's tokens and the end-of-sequence id) with the loss on the completion only.

The held-out split is by task (a hash of the task id): every example of a task is on one side,
so held-out loss measures kernels for tasks the model has not been trained on.
Near-duplicates: two candidates of one task whose normalized code (comments and whitespace
removed) is equal, or whose 5-token shingles overlap by at least ``near_duplicate`` (Jaccard),
keep only the first.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from cudarl.rollout.chat import ChatTokens
from cudarl.sft.examples import SftExample
from cudarl.tester.build.guard import inspect_source

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/|#[^\n]*", re.S)
_TOKENS = re.compile(r"[A-Za-z_]\w*|\d+|\S")


@dataclass(frozen=True)
class SftRow:
    """One training row: token ids and the example it came from."""

    role: str
    task_id: str
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    origin: str


@dataclass
class SftData:
    """Training and held-out rows and what happened to every example on the way."""

    train: list[SftRow] = field(default_factory=list)
    held_out: list[SftRow] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)  # reason -> count
    examples_in: int = 0

    def statistics(self) -> dict:
        def side(rows: list[SftRow]) -> dict:
            lengths = sorted(len(r.prompt_ids) + len(r.completion_ids) for r in rows)
            return {"rows": len(rows), "tasks": len({r.task_id for r in rows}),
                    "by_role": dict(Counter(r.role for r in rows)),
                    "tokens": sum(lengths), "longest": lengths[-1] if lengths else 0,
                    "median_length": lengths[len(lengths) // 2] if lengths else 0}

        return {"examples_in": self.examples_in, "dropped": dict(self.dropped), "train": side(self.train),
                "held_out": side(self.held_out)}


def _normalized(code: str) -> str:
    return " ".join(_COMMENTS.sub(" ", code).split())


def _shingles(code: str, size: int = 5) -> set[int]:
    tokens = _TOKENS.findall(_normalized(code))
    return {hash(tuple(tokens[i:i + size])) for i in range(max(1, len(tokens) - size + 1))}


def drop_near_duplicates(examples: Sequence[SftExample], threshold: float = 0.9) -> tuple[list[SftExample], int]:
    """The examples without near-duplicate answers (same role and task); returns (kept, dropped)."""
    kept: list[SftExample] = []
    seen: dict[tuple[str, str], list[set[int]]] = defaultdict(list)
    exact: set[tuple[str, str, str]] = set()
    dropped = 0
    for example in examples:
        group = (example.role, example.task_id)
        text = _normalized(example.candidate)
        if (*group, text) in exact:
            dropped += 1
            continue
        shingles = _shingles(example.candidate)
        if any(len(shingles & other) / max(1, len(shingles | other)) >= threshold for other in seen[group]):
            dropped += 1
            continue
        exact.add((*group, text))
        seen[group].append(shingles)
        kept.append(example)
    return kept, dropped


def is_held_out(task_id: str, fraction: float, seed: int = 0) -> bool:
    """Whether a task belongs to the held-out side (stable across runs and machines)."""
    digest = hashlib.sha256(f"{seed}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def build_rows(examples: Sequence[SftExample], chat: ChatTokens, max_length: int, held_out_fraction: float = 0.1,
               near_duplicate: float = 0.9, seed: int = 0) -> SftData:
    """Filter, deduplicate, split and tokenize. Every example dropped is counted by reason."""
    if not 0.0 <= held_out_fraction < 1.0:
        raise ValueError(f"held_out_fraction must be in [0, 1), got {held_out_fraction}")
    if max_length < 16:
        raise ValueError(f"max_length must be at least 16 tokens, got {max_length}")
    if chat.tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has no end-of-sequence token: answers could not end")
    data = SftData(examples_in=len(examples))
    accepted = []
    for example in examples:
        verdict = inspect_source(example.candidate)
        if verdict.ok:
            accepted.append(example)
        else:
            data.dropped[f"guard: {verdict.outcome}"] += 1
    unique, duplicates = drop_near_duplicates(accepted, near_duplicate)
    if duplicates:
        data.dropped["near-duplicate"] += duplicates
    for example in unique:
        prompt = chat.prompt(example.system, example.user)
        completion = chat.encode(example.answer) + [chat.tokenizer.eos_token_id]
        if len(prompt) + len(completion) > max_length:
            data.dropped["longer than max_length"] += 1
            continue
        row = SftRow(role=example.role, task_id=example.task_id, prompt_ids=tuple(prompt),
                     completion_ids=tuple(completion), origin=example.origin)
        (data.held_out if is_held_out(example.task_id, held_out_fraction, seed) else data.train).append(row)
    return data
