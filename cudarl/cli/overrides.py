"""``--set name=value`` overrides, shared by the commands that take them (``sft``, ``train``)."""

from __future__ import annotations

import json


def parse_value(text: str) -> object:
    """A ``--set`` value: JSON where it parses (numbers, true/false, lists), else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_overrides(items: list[str] | None, expected: str, dotted: bool = False) -> dict[str, object]:
    """``{name: value}`` from ``--set`` items; ``ConfigError`` naming ``expected`` for a malformed
    one (no ``=``, or, with ``dotted``, no ``table.`` before the name)."""
    from cudarl.config import ConfigError

    changes: dict[str, object] = {}
    for item in items or []:
        name, separator, value = item.partition("=")
        if not separator or (dotted and "." not in name):
            raise ConfigError(f"--set {item!r}: expected {expected}")
        changes[name.strip()] = parse_value(value)
    return changes
