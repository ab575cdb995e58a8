"""The A/B split between agent versions: a weighted choice per request, sticky per client key,
weights changeable while serving, and a rollback that takes a version out of the split when its
verified-kernel rate falls below a threshold.

Why sticky: a user iterating on one kernel should keep talking to the same agent version, or a
comparison of versions mixes their answers in one session. A new key's arm comes from a hash of
the key (the same on every replica, so replicas agree without sharing state); an assigned key
keeps its arm while that arm's weight stays above zero, also when the weights change (only keys
whose arm left the split move). Requests without a key are drawn at random by the weights.

Why a window for the rollback: the rate that matters is the version's recent one; a version that
was good for a thousand requests and then broke must still roll back. A version is judged only
after ``min_requests`` outcomes in its window, and the last version with weight is never rolled
back (the service keeps answering; the state says so).

Covered: choice, stickiness, weights, outcomes, rollback, a state dict for the answers' metrics.
Not covered: sharing outcomes between replicas (each replica judges from what it served).
"""

from __future__ import annotations

import hashlib
import random
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class ArmRecord:
    """One version's recent outcomes and its standing in the split."""

    weight: float
    outcomes: deque = field(default_factory=deque)  # True: the answer held a verified kernel
    served: int = 0
    rolled_back: bool = False

    def rate(self) -> float | None:
        return sum(self.outcomes) / len(self.outcomes) if self.outcomes else None


def _check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    if not weights:
        raise ValueError("the A/B split needs at least one version")
    bad = {arm: w for arm, w in weights.items() if not (w >= 0)}
    if bad:
        raise ValueError(f"A/B weights must be 0 or more, got {bad}")
    if sum(weights.values()) <= 0:
        raise ValueError("A/B weights add up to 0: at least one version must get requests")
    return dict(weights)


def hash_point(key: str) -> float:
    """A point in [0, 1) from ``key``, the same in every process."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


class ABSplit:
    """Weighted, sticky choice between agent versions, with rollback on a low verified rate."""

    def __init__(self, weights: Mapping[str, float], rollback_below: float | None = None, min_requests: int = 20,
                 window: int = 100, remembered_keys: int = 100_000, seed: int = 0) -> None:
        if rollback_below is not None and not 0 <= rollback_below <= 1:
            raise ValueError(f"rollback_below is a rate in [0, 1], got {rollback_below}")
        if min_requests < 1 or window < min_requests:
            raise ValueError(f"need 1 <= min_requests <= window, got {min_requests} and {window}")
        self.rollback_below, self.min_requests, self.window = rollback_below, min_requests, window
        self.arms = {arm: ArmRecord(weight, deque(maxlen=window)) for arm, weight in _check_weights(weights).items()}
        self._keys: OrderedDict[str, str] = OrderedDict()
        self._remembered = remembered_keys
        self._random = random.Random(seed)

    def _live(self) -> list[tuple[str, float]]:
        return [(arm, record.weight) for arm, record in self.arms.items() if record.weight > 0]

    def _pick(self, point: float) -> str:
        live = self._live()
        total = sum(weight for _, weight in live)
        edge = 0.0
        for arm, weight in live:
            edge += weight / total
            if point < edge:
                return arm
        return live[-1][0]

    def choose(self, client_key: str | None = None) -> str:
        """The version to serve this request (and remember for ``client_key``)."""
        if client_key is None:
            arm = self._pick(self._random.random())
        else:
            arm = self._keys.get(client_key)
            if arm is None or self.arms[arm].weight <= 0:
                arm = self._pick(hash_point(client_key))
            self._keys[client_key] = arm
            self._keys.move_to_end(client_key)
            while len(self._keys) > self._remembered:
                self._keys.popitem(last=False)
        self.arms[arm].served += 1
        return arm

    def set_weights(self, weights: Mapping[str, float]) -> None:
        """New weights (every version named; a new name adds a version). A rolled-back version
        given weight again is back in the split with a fresh window."""
        checked = _check_weights(weights)
        for arm, weight in checked.items():
            record = self.arms.setdefault(arm, ArmRecord(weight, deque(maxlen=self.window)))
            if record.rolled_back and weight > 0:
                record.rolled_back = False
                record.outcomes.clear()
            record.weight = weight
        for arm in set(self.arms) - set(checked):
            self.arms[arm].weight = 0.0

    def record(self, arm: str, verified: bool) -> str | None:
        """One answer's outcome for ``arm``; the version rolled back by it, if any."""
        if arm not in self.arms:
            raise KeyError(f"unknown version {arm!r}; the split holds {sorted(self.arms)}")
        record = self.arms[arm]
        record.outcomes.append(bool(verified))
        if (self.rollback_below is None or record.weight <= 0 or len(record.outcomes) < self.min_requests
                or record.rate() >= self.rollback_below):
            return None
        if len(self._live()) == 1:
            return None  # the last version with weight keeps serving
        record.weight, record.rolled_back = 0.0, True
        return arm

    def state(self) -> dict:
        """Per version: weight, served, recent verified rate, rolled back."""
        return {arm: {"weight": r.weight, "served": r.served, "verified_rate": r.rate(), "window": len(r.outcomes),
                      "rolled_back": r.rolled_back} for arm, r in self.arms.items()}
