"""What a dataset loader kept and what it skipped, so no row disappears uncounted."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Skipped:
    where: str  # file, or file:row
    reason: str


@dataclass
class LoadReport:
    """Rows or files seen, kept and skipped (with the reason for each skip)."""

    source: str
    seen: int = 0
    kept: int = 0
    skipped: list[Skipped] = field(default_factory=list)

    def skip(self, where: str, reason: str) -> None:
        self.skipped.append(Skipped(where, reason))

    def summary(self) -> str:
        line = f"{self.source}: {self.seen} seen, {self.kept} kept, {len(self.skipped)} skipped"
        reasons = "".join(f"\n  {s.where}: {s.reason}" for s in self.skipped[:20])
        more = f"\n  ... {len(self.skipped) - 20} more" if len(self.skipped) > 20 else ""
        return line + reasons + more
