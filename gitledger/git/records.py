"""The records of the git store, as bytes: intent records, event lines, merged note bodies.

An intent record is the canonical JSON of a key's task, step and digest; its blob id is the object the
key's note annotates, so its bytes never change. An event line is the event's JSON without its
``key`` field when that is the entry's key (the intent's): :func:`stored_line` writes it and
:func:`with_key` puts the key back on reading; lines written with the key read the same.
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring as _json_string

from gitledger.core.events import Event, encode_event
from gitledger.core.store import Intent


def intent_bytes(intent: Intent) -> bytes:
    """The intent record: what ``json.dumps`` of its fields gives (sorted, compact, not ASCII-escaped),
    built directly (it is hashed on every lookup of a key not seen before)."""
    digest, key, step, task = (_json_string(f) for f in (intent.digest, intent.key, intent.step, intent.task))
    return f'{{"digest":{digest},"key":{key},"step":{step},"task":{task},"v":1}}\n'.encode()


def parse_intent(data: bytes) -> Intent | None:
    """The intent in a record written by :func:`intent_bytes`, or None when it is not one."""
    try:
        record = json.loads(data)
        intent = Intent(record["key"], record["task"], record["step"], record["digest"])
    except (ValueError, UnicodeDecodeError, TypeError, KeyError):
        return None
    if not all(isinstance(x, str) for x in (intent.key, intent.task, intent.step, intent.digest)):
        return None
    return intent


def merge_note(old: bytes, lines: list[bytes]) -> bytes:
    """``old`` with the journal ``lines`` it does not hold yet appended (each once, in order)."""
    if not lines:
        return old
    if old and not old.endswith(b"\n"):
        old += b"\n"
    have = set(old.split(b"\n"))
    out = [old]
    for line in lines:
        if line not in have:
            have.add(line)
            out.append(line + b"\n")
    return b"".join(out)


def stored_line(key: str, event: Event) -> bytes:
    """The line an event is stored as: its JSON without the ``key`` field when that is the entry's
    own key (the key is the intent's, which the note annotates; :func:`with_key` puts it back on
    reading). Lines written with the key (before this) read the same."""
    if event.get("key") == key:
        event = {name: value for name, value in event.items() if name != "key"}
    return encode_event(event).rstrip(b"\n")


def with_key(event: Event, key: str) -> Event:
    """A stored event with its entry's key, in the order it had as written in full (sorted fields,
    then the parser's ``_line``)."""
    if "key" in event:
        return event
    fields = sorted([*((k, v) for k, v in event.items() if k != "_line"), ("key", key)], key=lambda f: f[0])
    out: Event = dict(fields)
    if "_line" in event:
        out["_line"] = event["_line"]
    return out


_STATE = re.compile(rb'"state":"([A-Za-z_]{1,40})"')


def state_of(line: bytes) -> str:
    """The ``state`` of an event line (a fold names each event it folds in its commit message),
    "event" without one, "damaged" when the line is not a JSON object. A line as gitledger writes it
    (compact, its one ``"state"`` field at the top level) is read without parsing it: a fold names
    ~2 000 events, and parsing them was 8 % of its time. Anything else is parsed. (A brace inside a
    string before the field can make the depth counted here wrong: the message then names a nested
    field; nothing else reads this word.)"""
    found = _STATE.search(line)
    if found is not None and line.count(b'"state":') == 1:
        before = line[: found.start()]
        if before.count(b"{") - before.count(b"}") == 1 and line.startswith(b"{") and line.endswith(b"}"):
            return found.group(1).decode()
    try:
        state = json.loads(line).get("state")
    except (ValueError, AttributeError):
        return "damaged"
    return state if isinstance(state, str) else "event"
