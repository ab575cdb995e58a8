"""A candidate: Python source defining ``ModelNew`` for one task, and its loaders.

Folder layouts accepted: ``CANDIDATES/<task_id>.py`` (one candidate per task) and
``CANDIDATES/<task_id>/<name>.py`` (several). JSONL: objects with ``task_id``, ``source`` and
an optional ``id``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, computed_field


class CandidateError(ValueError):
    """Candidates that cannot be loaded; the message names the file and line."""


class Candidate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    id: str
    source: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def source_hash(self) -> str:
        """Content hash of the source; identical candidates share compile and verdict caches."""
        return hashlib.sha256(self.source.encode()).hexdigest()


def load_candidates(path: Path | str) -> list[Candidate]:
    """Candidates from a folder or a ``.jsonl`` file, in a stable order."""
    path = Path(path)
    if not path.exists():
        raise CandidateError(f"no such candidate path: {path}")
    found: list[Candidate] = []
    if path.is_dir():
        for file in sorted(path.glob("*.py")):
            found.append(Candidate(task_id=file.stem, id=file.stem, source=file.read_text()))
        for folder in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
            for file in sorted(folder.glob("*.py")):
                found.append(
                    Candidate(task_id=folder.name, id=f"{folder.name}/{file.stem}", source=file.read_text())
                )
    elif path.suffix == ".jsonl":
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                task_id, source = data["task_id"], data["source"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise CandidateError(f"{path}:{number}: need a JSON object with task_id and source ({exc})") from exc
            found.append(Candidate(task_id=task_id, id=str(data.get("id", f"{task_id}#{number}")), source=source))
    else:
        raise CandidateError(f"{path}: expected a folder or a .jsonl file")
    if not found:
        raise CandidateError(f"{path}: no candidates found")
    return found
