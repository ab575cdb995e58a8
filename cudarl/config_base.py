"""The base of every typed settings section: unknown keys are errors, fields carry docstrings,
and ``with_changes`` validates overrides like a config file. Its own module so that sections
defined outside ``config.py`` (``config_sft.py``) share it without an import circle."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, ValidationError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    def with_changes(self, changes: dict[str, object]) -> Self:
        """A copy with settings changed by dotted path (``{"compile.mode": "extension"}``),
        validated like a config file: an unknown setting or a bad value raises ``ConfigError``
        naming it (``model_copy`` would take either silently)."""
        data = self.model_dump()
        for path, value in changes.items():
            *parents, leaf = path.split(".")
            node = data
            for part in parents:
                node = node.get(part) if isinstance(node, dict) else None
            if not isinstance(node, dict) or leaf not in node:
                raise ConfigError(f"unknown setting {path!r} in {type(self).__name__}")
            node[leaf] = value
        try:
            return type(self).model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"bad setting in {', '.join(changes)}: {exc}") from exc


class ConfigError(ValueError):
    """A config file that cannot be read or does not validate; the message names the key."""
