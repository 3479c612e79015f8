"""Profile templates and the JSON inside tool results (pure; no SDK types).

A template is a JSON value whose strings may hold ``{field.path}`` placeholders. A string that is
exactly one placeholder yields the field's value unchanged (a number stays a number); otherwise the
fields are written into the text. A placeholder whose field is missing makes the whole template
:class:`Missing`.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

_FIELD = re.compile(r"\{([A-Za-z0-9_.-]+)\}")
_SPACE = re.compile(r"\s+")


class Missing(LookupError):
    """A template names a field the values do not have."""


def lookup(values: Any, path: str) -> Any:
    """``values["a"]["b"]`` for ``"a.b"``; raises :class:`Missing`."""
    current = values
    for part in path.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdecimal() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise Missing(path)
    return current


def render(template: Any, values: Any) -> Any:
    """The template with its placeholders replaced by ``values``' fields."""
    if isinstance(template, str):
        whole = _FIELD.fullmatch(template)
        if whole:
            return lookup(values, whole.group(1))
        return _FIELD.sub(lambda m: _text(lookup(values, m.group(1))), template)
    if isinstance(template, Mapping):
        return {k: render(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, values) for v in template]
    return template


def render_or_none(template: Any, values: Any) -> Any:
    try:
        return render(template, values)
    except Missing:
        return None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def normalize(text: str) -> str:
    """Text as compared for keys: Unicode NFKC, case folded, runs of white space as one space."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


def result_json(result: Mapping[str, Any]) -> Any:
    """The JSON a tool result carries: its ``structuredContent``, else its first text block parsed as
    JSON (the GitHub MCP server answers in JSON text), else None."""
    structured = result.get("structuredContent")
    if structured is not None:
        return structured
    for block in result.get("content") or ():
        if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
            try:
                return json.loads(block["text"])
            except ValueError:
                return None
    return None


def result_text(result: Mapping[str, Any], limit: int = 500) -> str:
    """The text blocks of a tool result, joined and cut to ``limit`` characters (for messages)."""
    parts = [
        block["text"]
        for block in result.get("content") or ()
        if isinstance(block, Mapping) and isinstance(block.get("text"), str)
    ]
    text = " ".join(parts).strip() or "(no text)"
    return text if len(text) <= limit else text[: limit - 1] + "…"
