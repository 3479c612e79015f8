"""Guarding MCP tool calls with the step protocol: the logic of ``gitledger mcp-proxy``, transport-free.

For a guarded call the proxy derives a key from the tool's *natural* fields (the profile names them;
titles and bodies are left out, so a reworded retry has the same key), then runs the ordinary step
protocol on the repository's ledger::

    done ─────────────────────────────► the recorded result, _meta io.gitledger/replayed
    in flight in a live proxy ────────► tool error "in_progress" (the upstream is not called)
    otherwise: ask the upstream's own read tool (the profile's find)
        found ────────────────────────► done(already_existed); a result built from what was found
        absent ─► claim ─► call the upstream ─► done(created) with the WHOLE result | failed

The upstream is reached through :class:`Upstream` (synchronous; the relay sends its own request and
waits for the answer), results are plain JSON dicts in the wire form of ``CallToolResult``
(``content``, ``structuredContent``, ``isError``, ``_meta``), so this module is tested without a
transport.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gitledger.config import Config, McpFind, McpProfile, McpToolRule
from gitledger.core.checks import Check, LedgerCheck
from gitledger.core.errors import CheckError, ConflictError, CorruptLedgerError, UsageError
from gitledger.core.events import ATTEMPTING, DONE, FAILED, INFO, Entry
from gitledger.core.keys import Content, Names, StepKey
from gitledger.core.owner import Owner
from gitledger.core.policy import DEFAULT_LEASE, StepPolicy
from gitledger.core.protocol import (
    ALREADY_EXISTED,
    IN_PROGRESS,
    SKIPPED,
    ActionResult,
    Claim,
    StepRunner,
)
from gitledger.core.store import Intent, SerialStore, Store
from gitledger.features.proxy.templates import (
    Missing,
    lookup,
    normalize,
    render,
    result_json,
    result_text,
)

META = "io.gitledger/"
NO_TASK = "mcp-proxy"  # the task part of keys when none is known (tools whose profile allows it)
MAX_RECORD = 64 * 1024
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


@dataclass(frozen=True)
class ToolInfo:
    """What the proxy needs to know of an upstream tool (from its tools/list entry)."""

    name: str
    read_only: bool | None = None
    idempotent: bool | None = None
    required: tuple[str, ...] = ()  # required arguments (inputSchema.required)
    output_schema: bool = False  # results must carry structuredContent
    types: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # JSON Schema types of arguments


class UpstreamError(Exception):
    """The upstream did not answer with a tool result.

    ``unknown`` is True when the connection broke or timed out: the effect may or may not exist. It
    is False when the upstream answered with a protocol error (it refused the request).
    """

    def __init__(self, code: int, message: str, *, unknown: bool) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.unknown = unknown


class Upstream(Protocol):
    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The upstream's CallToolResult in wire form; raises :class:`UpstreamError`."""
        ...


@dataclass(frozen=True)
class ProxyError:
    """An MCP error response (JSON-RPC ``code`` and ``message``) instead of a tool result."""

    code: int
    message: str


@dataclass
class Reply:
    """What the proxy answers to a guarded ``tools/call``: a result or an MCP error."""

    status: str  # created, replayed, already_existed, failed, in_progress, refused, invalid, error
    result: dict[str, Any] | None = None
    error: ProxyError | None = None
    key: str | None = None


@dataclass
class _Call:
    name: str
    rule: McpToolRule
    arguments: dict[str, Any]  # as the agent sent them (and as they are forwarded)
    natural: dict[str, Any]
    text: str | None
    step: StepKey
    info: ToolInfo | None
    found_by: dict[str, Any]  # the arguments the find templates read: ``owner_prefix`` applied


def similar_text(a: str, b: str, *, same_task: bool) -> bool:
    """Are two free texts near-duplicates? The test shared with the agent guard: a low bar against what
    this task recorded for the same target, a high one against texts found upstream (anyone's)."""
    from gitledger.core.similarity import REALITY, SAME_INTENT, near_duplicate

    return near_duplicate(a, b, SAME_INTENT if same_task else REALITY)


class ProxyGuard:
    """Decides and records guarded tool calls on one ledger, for one task."""

    def __init__(
        self,
        store: Store,
        profile: McpProfile,
        *,
        task: str | None = None,
        config: Config | None = None,
        names: Names | None = None,
        owner: Owner | None = None,
        max_record: int = MAX_RECORD,
    ) -> None:
        self.store = SerialStore(store)
        self.runner = StepRunner(self.store, owner)
        self.profile = profile
        self.task = task
        self.config = config or Config()
        self.names = names or self.config.names
        self.max_record = max_record
        self.tools: dict[str, ToolInfo] = {}

    def set_tools(self, tools: Iterable[ToolInfo]) -> None:
        self.tools = {tool.name: tool for tool in tools}

    # -- what is guarded ----------------------------------------------------------------------------

    def rule_for(self, name: str) -> McpToolRule | None:
        """The rule that guards ``name``, or None when the call passes straight through.

        The profile decides first; then the tool's annotations: read-only tools and tools declared
        idempotent pass; every other tool (including one the upstream did not list) is guarded, keyed
        on its canonical arguments.
        """
        rule = self.profile.tools.get(name)
        if rule is not None:
            return rule if rule.guard else None
        info = self.tools.get(name)
        if info is not None and (info.read_only or info.idempotent):
            return None
        return McpToolRule()

    def step_key(self, name: str, arguments: Mapping[str, Any]) -> StepKey:
        """The ledger key a guarded call of ``name`` with ``arguments`` is recorded under."""
        try:
            return self._prepare(name, self.rule_for(name) or McpToolRule(), dict(arguments)).step
        except _NoTask as exc:
            raise UsageError(str(exc)) from exc

    # -- one guarded call ---------------------------------------------------------------------------

    def handle(self, name: str, arguments: Mapping[str, Any] | None, upstream: Upstream) -> Reply:
        rule = self.rule_for(name) or McpToolRule()
        try:
            call = self._prepare(name, rule, dict(arguments or {}))
        except UsageError as exc:
            return Reply("invalid", error=ProxyError(INVALID_PARAMS, f"gitledger: {exc.message}"))
        except _NoTask as exc:
            return Reply("invalid", result=_error_result(str(exc), {"status": "no_task"}))
        if call.text is not None:
            earlier = self._similar_done(call, upstream)
            if earlier is not None:
                return earlier
        find = _FindCheck(call, upstream) if rule.find is not None else None
        checks: list[Check] = [find] if find is not None else [LedgerCheck()]
        # what a reworded retry compares with if this call never ends, kept with the claim
        intended = None if call.text is None else {"key": call.natural, "text": call.text[: self.max_record]}
        try:
            started = self.runner.start(
                call.step, checks, self._policy(rule), claim_fields={"intended": intended}
            )
        except CheckError as exc:
            return Reply(
                "check_failed", result=_error_result(f"gitledger: {exc}", {"status": "check_failed"})
            )
        except (CorruptLedgerError, ConflictError) as exc:
            return Reply("error", result=_error_result(f"gitledger: {exc.message}", {"status": "error"}))
        if isinstance(started, Claim):
            return self._act(call, started, upstream)
        key = started.key
        if started.status == SKIPPED:
            return self._replay(call, started.result, started.ref, upstream)
        if started.status == ALREADY_EXISTED and find is not None and find.item is not None:
            return self._found(call, find.item, started.ref)
        if started.status == IN_PROGRESS:
            message = (
                f"gitledger: in_progress: {name} with this key is already running in another call; "
                f"{started.message}"
            )
            return Reply(
                IN_PROGRESS, result=_error_result(message, {"status": IN_PROGRESS, "key": key}), key=key
            )
        message = f"gitledger: {started.status}: {started.message or ''}".rstrip(": ")
        return Reply(
            started.status, result=_error_result(message, {"status": started.status, "key": key}), key=key
        )

    def _policy(self, rule: McpToolRule) -> StepPolicy:
        leases = (rule.lease, self.config.lease, DEFAULT_LEASE)
        return StepPolicy(
            on_unconfirmed=rule.on_unconfirmed or self.config.on_unconfirmed or "fail",
            lease=next(value for value in leases if value is not None),
        )

    def _prepare(self, name: str, rule: McpToolRule, arguments: dict[str, Any]) -> _Call:
        info = self.tools.get(name)
        required = set(info.required) if info is not None else set()
        fields = (
            rule.key if rule.key is not None else tuple(sorted(a for a in arguments if a != rule.similar))
        )
        meant = _without_owner_prefix(arguments, rule.owner_prefix)
        natural: dict[str, Any] = {}
        for name_ in fields:
            if arguments.get(name_) is None and name_ in required:
                raise UsageError(
                    f"{name} needs the argument {name_!r} (required by the tool, and part of what "
                    "identifies the effect); nothing was done"
                )
            if arguments.get(name_) is None:
                continue  # null is the argument left out
            wanted = info.types.get(name_, ()) if info is not None else ()
            if wanted and not any(_is(arguments[name_], kind) for kind in wanted):
                raise UsageError(
                    f"{name}: argument {name_!r} must be {' or '.join(wanted)} (the tool's input schema), "
                    f"not {_shown(arguments[name_])}; nothing was done"
                )
            natural[name_] = _normal(meant[name_], name_ in rule.casefold)
        text: str | None = None
        if rule.similar is not None:
            value = arguments.get(rule.similar)
            if value is None and rule.similar in required:
                raise UsageError(f"{name} needs the argument {rule.similar!r}; nothing was done")
            if value is not None and not isinstance(value, str):
                raise UsageError(
                    f"{name}: argument {rule.similar!r} must be text, not {type(value).__name__}"
                )
            text = value or ""
        if rule.task == "required" and not self.task:
            raise _NoTask(
                f"gitledger: {name} is guarded per task and no task is known: start the proxy with "
                "--task T or set GITLEDGER_TASK; nothing was done"
            )
        payload: dict[str, Any] = {"tool": name, "key": natural}
        if text is not None:
            payload["text"] = normalize(text)
        step = StepKey.derive(self.task or NO_TASK, f"mcp.{name}", Content.args(payload), self.names)
        return _Call(name, rule, arguments, natural, text, step, info, meant)

    def _similar_done(self, call: _Call, upstream: Upstream) -> Reply | None:
        """A done entry of this task and tool with the same natural key and a near-duplicate text; or
        one whose outcome is unknown (its proxy died, the upstream was lost), settled first by
        looking for its own text upstream: a reworded retry has a key of its own and would otherwise
        look only for its new text, at the high bar."""
        assert call.text is not None
        if self.store.load(Intent.of(call.step)).exists:
            return None  # this exact key has an entry: the protocol decides
        for entry in self.store.entries():
            if entry.field("task") != call.step.task or entry.field("step") != call.step.step:
                continue
            folded = entry.folded
            record = folded.done.get("result") if folded.state == DONE and folded.done else None
            if not isinstance(record, dict):
                record = entry.field("intended")
            if not isinstance(record, dict) or record.get("key") != call.natural:
                continue
            earlier = record.get("text")
            if not isinstance(earlier, str) or not similar_text(earlier, call.text, same_task=True):
                continue
            if folded.state == DONE:
                return self._replay_record(call, record, entry.key, folded.ref)
            unknown = folded.state == ATTEMPTING or entry.field("outcome_unknown") is True
            if unknown:
                settled = self._settle(call, entry, earlier, upstream)
                if settled is not None:
                    return settled
        return None

    def _settle(self, call: _Call, entry: Entry, text: str, upstream: Upstream) -> Reply | None:
        """Whether the earlier call of ``entry`` (``text``) made its effect: a reply when it did (or is
        still running), None when it did not (the entry is then settled failed)."""
        assert call.rule.similar is not None
        try:
            earlier = self._prepare(call.name, call.rule, {**call.arguments, call.rule.similar: text})
        except (UsageError, _NoTask):
            return None
        if earlier.step.key != entry.key:
            return None
        folded = entry.folded
        holder = self.runner.holder(folded) if folded.state == ATTEMPTING else None
        if holder is not None:
            started = self.runner.in_progress(earlier.step, holder)
            message = f"gitledger: in_progress: {call.name} of the same intent is running; {started.message}"
            meta = {"status": IN_PROGRESS, "key": entry.key}
            return Reply(IN_PROGRESS, result=_error_result(message, meta), key=entry.key)
        if call.rule.find is None:
            return None  # nothing can look: the earlier key stays unconfirmed, this call is its own
        find = _FindCheck(earlier, upstream)
        try:
            ref = find.find(earlier.step)
        except CheckError as exc:
            return Reply(
                "check_failed", result=_error_result(f"gitledger: {exc}", {"status": "check_failed"})
            )
        intent = Intent.of(earlier.step)
        ids = [c["id"] for c in folded.claims if isinstance(c.get("id"), str)] or None
        if ref is not None and find.item is not None:
            done = self.runner.event(earlier.step, DONE, outcome=ALREADY_EXISTED, ref=ref, claim=ids)
            self.store.append(intent, done, entry.version)
            return self._found(call, find.item, ref)
        if folded.state == ATTEMPTING:
            failed = self.runner.event(earlier.step, FAILED, claim=ids, message="settled: not found upstream")
            self.store.append(intent, failed, entry.version)
        else:
            self.runner.record(earlier.step, self.runner.event(earlier.step, INFO, outcome_unknown=False))
        return None

    def _act(self, call: _Call, claim: Claim, upstream: Upstream) -> Reply:
        key = call.step.key
        try:
            result = upstream.call_tool(call.name, call.arguments)
        except UpstreamError as exc:
            if exc.unknown and call.rule.find is None:
                # nothing can tell later whether it happened: leave our claim open (unconfirmed once
                # this proxy is gone; on_unconfirmed and 'gitledger resolve' settle it), unrenewed
                claim.stop_renewal()
                self.runner.record(
                    call.step,
                    self.runner.event(
                        call.step, "info", message=f"upstream lost during the call: {exc.message}"
                    ),
                )
            else:
                if exc.unknown:  # a reworded retry settles it by its text (_similar_done)
                    self.runner.record(call.step, self.runner.event(call.step, INFO, outcome_unknown=True))
                self.runner.fail(claim, exc)
            return Reply("error", error=ProxyError(exc.code, _upstream_message(call.name, exc)), key=key)
        except BaseException as exc:
            self.runner.fail(claim, exc)
            raise
        if result.get("isError"):
            message = f"{call.name} returned an error: {result_text(result)}"
            self.runner.finish(claim, ActionResult(ok=False, exit_code=1, message=message))
            return Reply("failed", result=result, key=key)
        ref = _ref(call.rule.ref, result_json(result))
        record: dict[str, Any] = {
            "tool": call.name,
            "arguments": call.arguments,
            "key": call.natural,
            "result": result,
        }
        if call.text is not None:
            record["text"] = call.text
        if len(json.dumps(record)) > self.max_record:
            record = {"tool": call.name, "key": call.natural, "text": call.text, "truncated": True}
        self.runner.finish(claim, ActionResult(ok=True, ref=ref, result=record))
        return Reply("created", result=_with_meta(result, {"key": key, "outcome": "created"}), key=key)

    def _replay(self, call: _Call, recorded: Any, ref: str | None, upstream: Upstream) -> Reply:
        if isinstance(recorded, dict) and isinstance(recorded.get("result"), dict):
            return self._replay_record(call, recorded, call.step.key, ref)
        # done without a recorded result (found earlier, resolved by hand, or too large to record)
        if call.rule.find is not None:
            find = _FindCheck(call, upstream)
            try:
                again = find.find(call.step)
            except CheckError:
                again = None
            if again is not None and find.item is not None:
                return self._found(call, find.item, again, replayed=True)
        message = (
            f"gitledger: {call.name} was already done ({ref or 'no ref recorded'}); it was not sent again"
        )
        meta = {"status": "replayed", "replayed": True, "key": call.step.key, "ref": ref}
        return Reply("replayed", result=_error_result(message, meta), key=call.step.key)

    def _replay_record(self, call: _Call, record: dict[str, Any], key: str, ref: str | None) -> Reply:
        result = record.get("result")
        if not isinstance(result, dict):
            message = (
                f"gitledger: {call.name} was already done ({ref or 'no ref recorded'}); it was not sent again"
            )
            meta = {"status": "replayed", "replayed": True, "key": key, "ref": ref}
            return Reply("replayed", result=_error_result(message, meta), key=key)
        meta = {"replayed": True, "key": key, "outcome": "replayed", "ref": ref}
        return Reply("replayed", result=_with_meta(result, meta), key=key)

    def _found(self, call: _Call, item: Any, ref: str | None, replayed: bool = False) -> Reply:
        """A result built from the effect the upstream's read tool found (nothing was sent)."""
        find = call.rule.find
        assert find is not None
        key = call.step.key
        structured = _render_fields(find.result, item) if find.result is not None else None
        meta = {"replayed": True, "key": key, "outcome": ALREADY_EXISTED, "ref": ref}
        if structured is None and call.info is not None and call.info.output_schema:
            message = f"gitledger: {call.name} already happened: {ref}; it was not sent again"
            return Reply(ALREADY_EXISTED, result=_error_result(message, meta), key=key)
        text = json.dumps(structured) if structured is not None else f"already exists: {ref}"
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
        if structured is not None:
            result["structuredContent"] = structured
        return Reply(ALREADY_EXISTED, result=_with_meta(result, meta), key=key)


class _NoTask(Exception):
    pass


@dataclass
class _FindCheck:
    """A reality check through one of the upstream's read tools (the profile's ``find``)."""

    call: _Call
    upstream: Upstream
    item: Any = None
    spec: str = field(init=False)
    queries_reality: bool = True

    def __post_init__(self) -> None:
        assert self.call.rule.find is not None
        self.spec = f"mcp:{self.call.rule.find.tool}"

    def find(self, step: StepKey) -> str | None:
        find: McpFind | None = self.call.rule.find
        assert find is not None
        args = self.call.found_by
        try:
            arguments = render(find.arguments, args)
        except Missing as exc:
            raise CheckError(f"{find.tool} needs the argument {exc.args[0]!r} of the call") from exc
        try:
            result = self.upstream.call_tool(find.tool, arguments)
        except UpstreamError as exc:
            raise CheckError(f"the upstream's {find.tool} failed: {exc.message}") from exc
        if result.get("isError"):
            raise CheckError(f"the upstream's {find.tool} answered with an error: {result_text(result)}")
        data = result_json(result)
        try:
            items = lookup(data, find.items) if find.items else data
        except Missing as exc:
            raise CheckError(f"the upstream's {find.tool} result has no {find.items!r}") from exc
        if isinstance(items, dict):
            items = [items]
        if not isinstance(items, list):
            raise CheckError(f"the upstream's {find.tool} did not answer with a list (JSON); cannot look")
        for item in items:
            if self._matches(find, item):
                self.item = item
                return _ref(find.ref, item) or json.dumps(item, sort_keys=True)[:200]
        return None

    def _matches(self, find: McpFind, item: Any) -> bool:
        args = self.call.found_by
        try:
            for path, template in find.match.items():
                if _plain(lookup(item, path)) != _plain(render(template, args)):
                    return False
            for path, template in find.similar.items():
                have, want = lookup(item, path), render(template, args)
                if not isinstance(have, str) or not isinstance(want, str):
                    return False
                if not similar_text(have, want, same_task=False):
                    return False
        except Missing:
            return False
        return True


_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "number": (int, float),
    "integer": int,
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}


def _is(value: Any, kind: str) -> bool:
    """Whether ``value`` (parsed JSON) is of JSON Schema type ``kind`` (an unknown type: yes)."""
    if kind not in _JSON_TYPES:
        return True
    if isinstance(value, bool):
        return kind == "boolean"
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES[kind])


def _shown(value: Any) -> str:
    if isinstance(value, list | dict):
        return "an array" if isinstance(value, list) else "an object"
    return json.dumps(value)[:50]


def _plain(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def _without_owner_prefix(arguments: dict[str, Any], owner_prefix: dict[str, str]) -> dict[str, Any]:
    """``arguments`` with each field of ``owner_prefix`` rid of an ``OWNER:`` prefix naming the owner
    the call names (compared without case): GitHub reads head ``acme:fix`` in a repository of acme as
    ``fix``, so both spellings are one pull request. A prefix naming another owner (a fork) stays."""
    meant = dict(arguments)
    for name, owner_arg in owner_prefix.items():
        value, owner = arguments.get(name), arguments.get(owner_arg)
        if isinstance(value, str) and isinstance(owner, str) and ":" in value:
            prefix, rest = value.split(":", 1)
            if prefix.strip().casefold() == owner.strip().casefold() and rest.strip():
                meant[name] = rest
    return meant


def _normal(value: Any, casefold: bool) -> Any:
    if isinstance(value, str):
        value = value.strip()
        return value.casefold() if casefold else value
    if isinstance(value, float) and value.is_integer():
        return int(value)  # JSON's 7.0 is 7
    return value


def _ref(template: str | None, values: Any) -> str | None:
    if template is None:
        return None
    try:
        ref = render(template, values)
    except Missing:
        return None
    return ref if isinstance(ref, str) else json.dumps(ref)


def _render_fields(template: Any, item: Any) -> Any:
    """A result template rendered field by field: fields the item lacks are left out."""
    if isinstance(template, dict):
        out = {}
        for name, value in template.items():
            try:
                out[name] = render(value, item)
            except Missing:
                continue
        return out
    try:
        return render(template, item)
    except Missing:
        return None


def _with_meta(result: dict[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(result)
    meta = dict(out.get("_meta") or {})
    meta.update({META + name: value for name, value in fields.items() if value is not None})
    out["_meta"] = meta
    return out


def _error_result(message: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    return _with_meta({"content": [{"type": "text", "text": message}], "isError": True}, meta)


def _upstream_message(tool: str, exc: UpstreamError) -> str:
    if exc.unknown:
        return (
            f"gitledger: the upstream MCP server was lost during {tool} ({exc.message}); whether it acted "
            "is unknown: a retry asks it (or the ledger) first"
        )
    return f"gitledger: the upstream refused {tool}: {exc.message}"
