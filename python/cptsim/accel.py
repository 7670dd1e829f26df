"""Accelerator configurations: ``load`` a built-in by name or a TOML file, edit it with
``replace``, and pass it to ``cptsim.cost(accel=[...])``."""

import json
import sys
from typing import Any, Dict, List, Tuple

from . import _cptsim
from ._cptsim import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.9 and 3.10
    import tomli as tomllib

__all__ = ["AccelConfig", "builtins", "load"]


def builtins() -> List[str]:
    """The built-in configuration names."""
    return list(_cptsim.accel_builtins())


class AccelConfig:
    """One accelerator configuration: its TOML text, checked by cptsim's parser."""

    def __init__(self, text: str, origin: str):
        self.name = _cptsim.accel_check(text, origin)
        self._text = text
        self.origin = origin

    def to_toml(self) -> str:
        """The configuration's TOML text."""
        return self._text

    def to_dict(self) -> Dict[str, Any]:
        """The configuration as nested dicts (top-level keys and one dict per section)."""
        return tomllib.loads(self._text)

    def replace(self, changes: Dict[str, Any] = None, **keys: Any) -> "AccelConfig":
        """A copy with keys changed: ``replace(rows=32)`` sets the one key of that name in any
        section; ``replace({"array.rows": 32})`` names the section. The copy is checked like a
        file (a value the model cannot use raises ``UsageError``)."""
        table = self.to_dict()
        edits = dict(changes or {}, **keys)
        for key, value in edits.items():
            section, leaf = _locate(table, key)
            section[leaf] = value
        said = ", ".join(f"{k}={v!r}" for k, v in edits.items())
        return AccelConfig(_dump(table), f"{self.origin} with {said}")

    def __repr__(self) -> str:
        return f"AccelConfig({self.name!r}, from {self.origin})"

    def _cost_arg(self) -> Tuple[str, str]:
        return (self._text, self.origin)


def load(name_or_toml: str) -> AccelConfig:
    """A built-in configuration by name (see ``builtins()``) or a TOML file by path."""
    text, origin = _cptsim.accel_text(str(name_or_toml))
    return AccelConfig(text, origin)


def _locate(table: Dict[str, Any], key: str):
    """The dict holding ``key`` (``section.key`` or a key name found once) and the key in it."""
    if "." in key:
        section, leaf = key.split(".", 1)
        inner = table.get(section)
        if isinstance(inner, dict) and leaf in inner:
            return inner, leaf
        raise UsageError(f"accel: no key `{key}` in the configuration")
    if key in table and not isinstance(table[key], dict):
        return table, key
    found = [s for s, v in table.items() if isinstance(v, dict) and key in v]
    if len(found) == 1:
        return table[found[0]], key
    if found:
        paths = ", ".join(f"{s}.{key}" for s in found)
        raise UsageError(f"accel: key `{key}` is in several sections ({paths}); name one")
    keys = sorted(
        [k for k, v in table.items() if not isinstance(v, dict)]
        + [f"{s}.{k}" for s, v in table.items() if isinstance(v, dict) for k in v]
    )
    raise UsageError(f"accel: no key `{key}` in the configuration (keys: {', '.join(keys)})")


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise UsageError(f"accel: value {v!r} is not a TOML string, number, boolean or list")


def _dump(table: Dict[str, Any]) -> str:
    """TOML text of a configuration: top-level keys, then one table per section."""
    lines = [f"{k} = {_value(v)}" for k, v in table.items() if not isinstance(v, dict)]
    for section, inner in table.items():
        if isinstance(inner, dict):
            lines.append(f"\n[{section}]")
            lines.extend(f"{k} = {_value(v)}" for k, v in inner.items())
    return "\n".join(lines) + "\n"
