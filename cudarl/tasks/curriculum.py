"""The curriculum: which tier's tasks training samples, and when it moves on.

Sampling is mostly from the current tier, with some replay of earlier tiers. Results of the
current tier's tasks fill a rolling window; when the window is full and every gate holds (compile
rate, pass rate, optionally mean speedup of correct candidates), the curriculum promotes to the
next tier and starts a fresh window. Optional demotion moves back one tier when a full window's
pass rate collapses. ``state_dict`` captures everything, the sampler's random state included, so
a resumed run samples exactly what the uninterrupted one would have.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from cudarl.config import CurriculumConfig
from cudarl.tasks.task import Task


@dataclass(frozen=True)
class Result:
    compiled: bool
    passed: bool
    speedup: float | None = None


class Curriculum:
    def __init__(self, tasks: list[Task], config: CurriculumConfig | None = None) -> None:
        self.config = config or CurriculumConfig()
        self.by_tier = {tier: [t for t in tasks if t.tier == tier] for tier in self.config.tiers}
        self.tiers = [tier for tier in self.config.tiers if self.by_tier[tier]]
        if not self.tiers:
            raise ValueError(f"no tasks in any of the tiers {self.config.tiers}")
        self.tier_of = {t.id: t.tier for t in tasks}
        self.level = 0
        self.window: deque[Result] = deque(maxlen=self.config.window)
        self.events: list[str] = []
        self._rng = random.Random(self.config.seed)

    @property
    def tier(self) -> str:
        return self.tiers[self.level]

    def sample(self, count: int) -> list[Task]:
        """``count`` tasks: the current tier's, with ``replay_fraction`` from earlier tiers."""
        chosen = []
        for _ in range(count):
            if self.level > 0 and self._rng.random() < self.config.replay_fraction:
                tier = self.tiers[self._rng.randrange(self.level)]
            else:
                tier = self.tier
            chosen.append(self._rng.choice(self.by_tier[tier]))
        return chosen

    def gates(self) -> dict[str, float | bool | None]:
        """The window's rates and whether each gate holds."""
        results = list(self.window)
        count = len(results)
        compile_rate = sum(r.compiled for r in results) / count if count else 0.0
        pass_rate = sum(r.passed for r in results) / count if count else 0.0
        speedups = [r.speedup for r in results if r.passed and r.speedup is not None]
        mean_speedup = sum(speedups) / len(speedups) if speedups else None
        speedup_ok = self.config.speedup_gate is None or (
            mean_speedup is not None and mean_speedup > self.config.speedup_gate)
        return {"results": count, "full": count >= self.config.window, "compile_rate": compile_rate,
                "pass_rate": pass_rate, "mean_speedup": mean_speedup,
                "compile_ok": compile_rate > self.config.compile_rate_gate,
                "pass_ok": pass_rate > self.config.pass_rate_gate, "speedup_ok": speedup_ok}

    def record(self, task_id: str, compiled: bool, passed: bool, speedup: float | None = None) -> str | None:
        """Count one result; returns ``"promoted"`` or ``"demoted"`` when the tier changed."""
        if self.tier_of.get(task_id) != self.tier:
            return None  # replayed (or unknown) tasks do not move the gates
        self.window.append(Result(compiled, passed, speedup))
        gates = self.gates()
        if not gates["full"]:
            return None
        if gates["compile_ok"] and gates["pass_ok"] and gates["speedup_ok"] and self.level < len(self.tiers) - 1:
            return self._move(+1, "promoted", gates)
        if self.config.demotion and self.level > 0 and gates["pass_rate"] < self.config.demotion_pass_rate:
            return self._move(-1, "demoted", gates)
        return None

    def record_verdict(self, verdict) -> str | None:
        """``record`` from a tester verdict."""
        compiled = verdict.compile is not None and not verdict.compile.errors
        return self.record(verdict.task_id, compiled, verdict.correct, verdict.speedup)

    def _move(self, step: int, event: str, gates: dict) -> str:
        before = self.tier
        self.level += step
        self.window.clear()
        self.events.append(f"{event} {before} -> {self.tier} (compile {gates['compile_rate']:.2f}, "
                           f"pass {gates['pass_rate']:.2f})")
        return event

    def state_dict(self) -> dict:
        version, internal, gauss = self._rng.getstate()
        return {"level": self.level, "tier": self.tier,
                "window": [[r.compiled, r.passed, r.speedup] for r in self.window],
                "events": list(self.events), "rng": [version, list(internal), gauss],
                "config": self.config.model_dump(mode="json")}

    def load_state_dict(self, state: dict) -> None:
        if state.get("config") != self.config.model_dump(mode="json"):
            raise ValueError("curriculum state was saved with a different curriculum config")
        if state["tier"] not in self.tiers:
            raise ValueError(f"curriculum state names tier {state['tier']!r}, not among {self.tiers}")
        self.level = self.tiers.index(state["tier"])
        self.window = deque((Result(*r) for r in state["window"]), maxlen=self.config.window)
        self.events = list(state["events"])
        version, internal, gauss = state["rng"]
        self._rng.setstate((version, tuple(internal), gauss))
