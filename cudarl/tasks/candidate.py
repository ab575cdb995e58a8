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

from cudarl.files import read_text


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


def _read_text(file: Path) -> str:
    return read_text(file, CandidateError)


def _from_json_line(path: Path, number: int, line: str) -> Candidate:
    where = f"{path}:{number}"
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CandidateError(f"{where}: not JSON ({exc.msg})") from exc
    if not isinstance(data, dict):
        raise CandidateError(f"{where}: need a JSON object with task_id and source, got {type(data).__name__}")
    for field in ("task_id", "source"):
        if not isinstance(data.get(field), str) or not data[field]:
            raise CandidateError(f"{where}: {field!r} must be a non-empty string, got {data.get(field)!r:.60}")
    name = data.get("id", f"{data['task_id']}#{number}")
    if not isinstance(name, str | int) or isinstance(name, bool) or not str(name):
        raise CandidateError(f"{where}: 'id' must be a string, got {name!r:.60}")
    return Candidate(task_id=data["task_id"], id=str(name), source=data["source"])


def load_candidates(path: Path | str) -> list[Candidate]:
    """Candidates from a folder or a ``.jsonl`` file, in a stable order. Anything wrong (a file
    that is not UTF-8, a malformed line, a missing or non-string field, two candidates with one
    id) raises ``CandidateError`` naming the file and line: a report must not mix candidates."""
    path = Path(path)
    if not path.exists():
        raise CandidateError(f"no such candidate path: {path}")
    found: list[Candidate] = []
    if path.is_dir():
        for file in sorted(path.glob("*.py")):
            found.append(Candidate(task_id=file.stem, id=file.stem, source=_read_text(file)))
        for folder in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
            for file in sorted(folder.glob("*.py")):
                found.append(Candidate(task_id=folder.name, id=f"{folder.name}/{file.stem}", source=_read_text(file)))
    elif path.suffix == ".jsonl":
        for number, line in enumerate(_read_text(path).splitlines(), start=1):
            if line.strip():
                found.append(_from_json_line(path, number, line))
    else:
        raise CandidateError(f"{path}: expected a folder or a .jsonl file")
    if not found:
        raise CandidateError(f"{path}: no candidates found")
    seen: set[str] = set()
    for candidate in found:
        if candidate.id in seen:
            raise CandidateError(f"{path}: two candidates have the id {candidate.id!r} (ids must be unique)")
        seen.add(candidate.id)
    return found
