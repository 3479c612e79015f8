"""``.gitledger.yml``: repository defaults, loaded in one place into frozen, typed settings.

Example::

    remote: origin            # the remote 'sync' and remote claims use
    claims: local             # or 'remote': push each claim to the remote before acting
    durability: fsync         # claims reach the disk before the action; 'full': every event; 'none'
    lease: 900                # seconds a claim holds against owners on other hosts
    settle: 15                # seconds a lost write may still land (default per effect kind)
    on_unconfirmed: fail      # fail | retry | skip
    prefixes:
      branch: gitledger/
      label: "gitledger:"
    github:
      repo: acme/widgets
    steps:
      open-pr:
        checks: [github-pr]
        lease: 600
      notify:
        checks: [ledger]
        on_unconfirmed: skip
    mcp:                      # profiles for 'gitledger mcp-proxy' (see docs/mcp.md)
      profiles:
        github:               # extends the built-in profile: these tools replace its rules
          tools:
            merge_pull_request: {key: [owner, repo, pullNumber], task: optional}
    agent:                    # the agent guard (docs/agents.md)
      task_branch: "agent/(?P<task>[^/]+)"   # the task from the branch name
      one_pr_per_task: true
      rules:                  # more tool calls to guard
        - tool: "mcp__forge__open_merge_request"          # regex, whole tool name
          effect: pr                                        # pr | comment | issue | push
          fields: {repo: project, head: source_branch, base: target_branch}
        - command: "hub pull-request"                     # the command's first words
          effect: pr
          fields: {head: "--head", base: "--base", title: "--message"}

A bad file raises :class:`~gitledger.core.errors.ConfigError` naming the file, the line and the fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitledger.core.errors import ConfigError, UsageError
from gitledger.core.keys import Names
from gitledger.core.remotes import is_owner_repo

FILENAME = ".gitledger.yml"
_SAFE_API_URL = re.compile(r"^(https://[^\s/]+|http://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?)(/\S*)?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # escaped in error messages, which are one line
# Anchors and aliases stay allowed: sharing one rule or result between tools is what they are for, and a
# committed file using them must keep working. But the readers below see the tree with every alias
# expanded, and a few lines of aliases can stand for billions of values ("billion laughs") or, naming an
# enclosing value, for an endless tree. So the tree is measured as expanded before anything reads it,
# against limits no real configuration comes near, and refused with one line past them.
_MAX_DEPTH = 64  # levels of lists and mappings (PyYAML composes them recursively, as do the readers)
_MAX_VALUES = 10_000  # nodes once aliases are expanded (the packaged GitHub profile has under 300)
_MAX_CHARS = 1024 * 1024  # the whole file (the packaged GitHub profile is ~4 KB)


@dataclass(frozen=True)
class StepConfig:
    checks: tuple[str, ...] | None = None
    on_unconfirmed: str | None = None
    lease: float | None = None
    settle: float | None = None


@dataclass(frozen=True)
class McpFind:
    """How a profile finds a tool's effect with one of the upstream's own read tools.

    Values are templates: ``"{field}"`` is the call's argument (or, for ``match``, ``similar``, ``ref``
    and ``result``, the found item's field; dotted paths reach inside objects).
    """

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    items: str | None = None  # where the list is in the read result (dotted path); None: the result
    match: dict[str, str] = field(default_factory=dict)  # item path -> template: must be equal
    similar: dict[str, str] = field(default_factory=dict)  # item path -> template: near-duplicate text
    ref: str | None = None  # template over the item: what the ledger records as the effect's ref
    result: Any = None  # template over the item: the structured result returned for a found effect


@dataclass(frozen=True)
class McpToolRule:
    """How the MCP proxy treats one tool: guard or not, its natural key, how to find its effect."""

    guard: bool = True
    key: tuple[str, ...] | None = None  # natural key fields; None: every argument (canonical JSON)
    casefold: tuple[str, ...] = ()  # key fields compared without case (GitHub owner and repo names)
    # key fields whose "OWNER:" prefix is dropped when OWNER is the named argument's value ({head: owner}:
    # GitHub reads head "acme:fix" in a repository of acme as "fix")
    owner_prefix: dict[str, str] = field(default_factory=dict)
    task: str = "optional"  # "required": refuse without a task; "optional": key on it when known
    similar: str | None = None  # a free-text argument compared as a near-duplicate, not exactly
    ref: str | None = None  # template over the tool's result: the ref recorded with done
    find: McpFind | None = None
    on_unconfirmed: str | None = None
    lease: float | None = None


@dataclass(frozen=True)
class McpProfile:
    name: str
    description: str = ""
    tools: dict[str, McpToolRule] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentRule:
    """One extra call the agent guard recognises: a tool name pattern or a command's first words."""

    effect: str
    fields: tuple[tuple[str, str], ...]  # (effect field, tool_input key | option such as --head | argN)
    tool: str | None = None  # a regular expression matched against the whole tool name
    command: tuple[str, ...] | None = None  # the first words of a shell command


@dataclass(frozen=True)
class AgentConfig:
    task_branch: str | None = None
    one_pr_per_task: bool = True
    rules: tuple[AgentRule, ...] = ()


@dataclass(frozen=True)
class Config:
    path: Path | None = None
    remote: str | None = None
    claims: str = "local"
    durability: str = "fsync"
    lease: float | None = None
    settle: float | None = None
    on_unconfirmed: str | None = None
    names: Names = field(default_factory=Names)
    github_repo: str | None = None
    github_api_url: str | None = None
    steps: dict[str, StepConfig] = field(default_factory=dict)
    mcp_profiles: dict[str, McpProfile] = field(default_factory=dict)
    agent: AgentConfig = field(default_factory=AgentConfig)

    def step(self, name: str) -> StepConfig:
        return self.steps.get(name, StepConfig())


class _Reader:
    """Validates a composed YAML node tree and reports errors with file and line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, node: Any, message: str, mark: Any = None) -> ConfigError:
        """The error at ``node``'s line, or at ``mark`` (a YAML error's position, with its column)."""
        if mark is not None:
            at = f"line {mark.line + 1} column {mark.column + 1}"
        else:
            at = f"line {node.start_mark.line + 1 if node is not None else 1}"
        # one line, whatever the names in the file hold (a key may be a newline): escaped as in Python
        message = _CONTROL.sub(lambda m: repr(m.group())[1:-1], message)
        return ConfigError(f"{self.path} {at}: {message}")

    def measure(self, root: Any) -> None:
        """Refuse a tree holding itself, or too deep or too large once its aliases are expanded."""
        import yaml

        visited = 0
        enclosing: set[int] = set()  # ids of the collections around the node visited

        def visit(node: Any, depth: int) -> None:  # depth is capped, and so is the recursion
            nonlocal visited
            visited += 1
            if visited > _MAX_VALUES:
                raise self.fail(
                    node,
                    f"the file holds more than {_MAX_VALUES} values once aliases are expanded; "
                    "use fewer aliases",
                )
            if isinstance(node, yaml.ScalarNode):
                return
            if id(node) in enclosing:
                raise self.fail(
                    node, "this value holds an alias to itself, an endless loop; remove that alias"
                )
            if depth > _MAX_DEPTH:
                raise self.fail(
                    node,
                    f"values nested more than {_MAX_DEPTH} levels deep once aliases are expanded; "
                    "flatten them",
                )
            pairs = node.value if isinstance(node, yaml.MappingNode) else [(item,) for item in node.value]
            enclosing.add(id(node))
            for pair in pairs:
                for child in pair:
                    visit(child, depth + 1)
            enclosing.discard(id(node))

        visit(root, 1)

    def mapping(self, node: Any, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        import yaml

        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{where} must be a mapping of options")
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if not isinstance(key_node, yaml.ScalarNode) or not isinstance(key, str):
                raise self.fail(key_node, f"{where} has a key that is not a name")
            if allowed and key not in allowed:
                raise self.fail(
                    key_node, f"unknown option {key!r} in {where}; expected one of: {', '.join(allowed)}"
                )
            if key in out:
                raise self.fail(key_node, f"option {key!r} appears twice in {where}; keep one")
            out[key] = value_node
        return out

    def scalar(self, node: Any, where: str) -> Any:
        import yaml

        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, f"{where} must be a single value")
        return self.value(node, where)

    def value(self, node: Any, where: str) -> Any:
        """The node as plain Python data (safe tags only).

        A value that does not fit its tag (``!!float abc``, ``!!bool maybe``, ``!!timestamp x``) makes
        PyYAML raise ValueError, KeyError, IndexError or AttributeError rather than a YAMLError: each is
        the file's fault, so each becomes one line saying where.
        """
        import yaml

        try:
            return yaml.constructor.SafeConstructor().construct_document(node)
        except (yaml.YAMLError, ValueError, LookupError, AttributeError) as exc:
            if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
                problem = " ".join(exc.problem.split())  # one line, without PyYAML's excerpt of the file
            elif isinstance(node, yaml.ScalarNode):
                text = node.value if len(node.value) <= 40 else node.value[:40] + "..."
                problem = f"{text!r} is not a valid {node.tag}"
            else:
                problem = "a value in it does not fit its tag"
            problem = problem.replace("tag:yaml.org,2002:", "!!")
            mark = getattr(exc, "problem_mark", None) or node.start_mark
            raise self.fail(
                node, f"{where} is not a valid value ({problem}); fix it or remove its tag", mark
            ) from exc

    def string(self, node: Any, where: str, choices: tuple[str, ...] = ()) -> str:
        value = self.scalar(node, where)
        if not isinstance(value, str) or not value:
            raise self.fail(node, f"{where} must be a non-empty string")
        if choices and value not in choices:
            raise self.fail(node, f"{where} is {value!r}; use one of: {', '.join(choices)}")
        return value

    def seconds(self, node: Any, where: str) -> float:
        from gitledger.core.policy import MAX_LEASE

        value = self.scalar(node, where)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_LEASE:
            raise self.fail(
                node, f"{where} must be a positive number of seconds up to {MAX_LEASE:.0f}, e.g. 900"
            )
        return float(value)

    def settle(self, node: Any, where: str) -> float:
        from gitledger.core.policy import MAX_SETTLE

        value = self.scalar(node, where)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_SETTLE:
            raise self.fail(node, f"{where} must be 0 to {MAX_SETTLE:.0f} seconds, e.g. 15")
        return float(value)

    def checks(self, node: Any, where: str) -> tuple[str, ...]:
        import yaml

        from gitledger.core.checks import validate_spec

        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        specs = []
        for item in items:
            spec = self.string(item, where)
            reason = validate_spec(spec)
            if reason:
                raise self.fail(item, reason)
            specs.append(spec)
        return tuple(specs)


def _compose(text: str, path: Path) -> Any:
    """The YAML node tree of ``text``; nesting past _MAX_DEPTH is refused first, from the parser's events
    (PyYAML's composer recurses once per level: 5 000 ``[`` would be a RecursionError)."""
    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > _MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else 1
                raise ConfigError(
                    f"{path} line {line}: values nested more than {_MAX_DEPTH} levels deep; flatten them"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return yaml.compose(text, Loader=yaml.SafeLoader)


def parse(text: str, path: Path) -> Config:
    import yaml

    from gitledger.core.policy import ON_UNCONFIRMED

    if len(text) > _MAX_CHARS:  # PyYAML reads ~2 MB a second, comments too
        raise ConfigError(
            f"{path}: the file is larger than {_MAX_CHARS // 1024 // 1024} MiB; keep only gitledger's "
            "settings there (they take a few KB)"
        )
    try:
        root = _compose(text, path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{line}: invalid YAML ({problem}); fix the syntax") from exc
    if root is None:
        return Config(path=path)
    r = _Reader(path)
    r.measure(root)
    top = r.mapping(
        root,
        "the file",
        (
            "version",
            "remote",
            "claims",
            "durability",
            "lease",
            "settle",
            "on_unconfirmed",
            "prefixes",
            "github",
            "steps",
            "agent",
            "mcp",
        ),
    )
    settings: dict[str, Any] = {"path": path}
    if "version" in top and r.scalar(top["version"], "version") != 1:
        raise r.fail(top["version"], "version must be 1")
    if "remote" in top:
        settings["remote"] = r.string(top["remote"], "remote")
    if "claims" in top:
        settings["claims"] = r.string(top["claims"], "claims", ("local", "remote"))
    if "durability" in top:
        settings["durability"] = r.string(top["durability"], "durability", ("fsync", "full", "none"))
    if "lease" in top:
        settings["lease"] = r.seconds(top["lease"], "lease")
    if "settle" in top:
        settings["settle"] = r.settle(top["settle"], "settle")
    if "on_unconfirmed" in top:
        settings["on_unconfirmed"] = r.string(top["on_unconfirmed"], "on_unconfirmed", ON_UNCONFIRMED)
    if "prefixes" in top:
        prefixes = r.mapping(top["prefixes"], "prefixes", ("branch", "label"))
        values = {k: r.string(v, f"prefixes.{k}") for k, v in prefixes.items()}
        try:
            settings["names"] = Names(
                branch_prefix=values.get("branch", Names.branch_prefix),
                label_prefix=values.get("label", Names.label_prefix),
            )
        except UsageError as exc:  # Names validates the prefixes
            raise r.fail(top["prefixes"], str(exc)) from exc
    if "github" in top:
        gh = r.mapping(top["github"], "github", ("repo", "api_url"))
        if "repo" in gh:
            repo = r.string(gh["repo"], "github.repo")
            if not is_owner_repo(repo):
                raise r.fail(gh["repo"], f"github.repo {repo!r} must look like OWNER/NAME")
            settings["github_repo"] = repo
        if "api_url" in gh:
            url = r.string(gh["api_url"], "github.api_url")
            if not _SAFE_API_URL.match(url):
                # the token is sent there: a committed file must not send it in clear text elsewhere
                raise r.fail(
                    gh["api_url"],
                    f"github.api_url {url!r} must be an https:// URL (http:// only to localhost/127.0.0.1); "
                    "use GITHUB_API_URL for anything else",
                )
            settings["github_api_url"] = url
    if "steps" in top:
        steps: dict[str, StepConfig] = {}
        for name, node in r.mapping(top["steps"], "steps", ()).items():
            where = f"steps.{name}"
            opts = r.mapping(node, where, ("checks", "on_unconfirmed", "lease", "settle"))
            steps[name] = StepConfig(
                checks=r.checks(opts["checks"], f"{where}.checks") if "checks" in opts else None,
                on_unconfirmed=(
                    r.string(opts["on_unconfirmed"], f"{where}.on_unconfirmed", ON_UNCONFIRMED)
                    if "on_unconfirmed" in opts
                    else None
                ),
                lease=r.seconds(opts["lease"], f"{where}.lease") if "lease" in opts else None,
                settle=r.settle(opts["settle"], f"{where}.settle") if "settle" in opts else None,
            )
        settings["steps"] = steps
    if "agent" in top:
        settings["agent"] = _agent(r, top["agent"])
    if "mcp" in top:
        mcp = r.mapping(top["mcp"], "mcp", ("profiles",))
        if "profiles" in mcp:
            settings["mcp_profiles"] = {
                name: _mcp_profile(r, node, name, f"mcp.profiles.{name}")
                for name, node in r.mapping(mcp["profiles"], "mcp.profiles", ()).items()
            }
    return Config(**settings)


def _agent(r: _Reader, node: Any) -> AgentConfig:
    import yaml

    from gitledger.core.effects import FIELDS, KINDS
    from gitledger.core.task import pattern_problem

    opts = r.mapping(node, "agent", ("task_branch", "one_pr_per_task", "rules"))
    out: dict[str, Any] = {}
    if "task_branch" in opts:
        pattern = r.string(opts["task_branch"], "agent.task_branch")
        problem = pattern_problem(pattern)
        if problem:
            raise r.fail(opts["task_branch"], problem)
        out["task_branch"] = pattern
    if "one_pr_per_task" in opts:
        value = r.scalar(opts["one_pr_per_task"], "agent.one_pr_per_task")
        if not isinstance(value, bool):
            raise r.fail(opts["one_pr_per_task"], "agent.one_pr_per_task must be true or false")
        out["one_pr_per_task"] = value
    if "rules" in opts:
        if not isinstance(opts["rules"], yaml.SequenceNode):
            raise r.fail(opts["rules"], "agent.rules must be a list of rules")
        rules = []
        for i, item in enumerate(opts["rules"].value):
            where = f"agent.rules[{i}]"
            rule = r.mapping(item, where, ("tool", "command", "effect", "fields"))
            if ("tool" in rule) == ("command" in rule):
                raise r.fail(item, f"{where} needs exactly one of 'tool' (a tool name pattern) or 'command'")
            effect = r.string(rule["effect"], f"{where}.effect", KINDS) if "effect" in rule else None
            if effect is None:
                raise r.fail(item, f"{where} needs 'effect': one of {', '.join(KINDS)}")
            fields: list[tuple[str, str]] = []
            if "fields" in rule:
                for name, value_node in r.mapping(rule["fields"], f"{where}.fields", FIELDS[effect]).items():
                    fields.append((name, r.string(value_node, f"{where}.fields.{name}")))
            tool = command = None
            if "tool" in rule:
                tool = r.string(rule["tool"], f"{where}.tool")
                try:
                    re.compile(tool)
                except re.error as exc:
                    raise r.fail(
                        rule["tool"], f"{where}.tool is not a valid regular expression ({exc})"
                    ) from exc
            else:
                words = r.string(rule["command"], f"{where}.command").split()
                command = tuple(words)
            rules.append(AgentRule(effect, tuple(fields), tool, command))
        out["rules"] = tuple(rules)
    return AgentConfig(**out)


_TEMPLATE_FIELD = re.compile(r"\{([^{}]*)\}")
_FIELD_PATH = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")


# what YAML reads that JSON (the MCP call a template is sent in) has no value for
_NOT_JSON = {"date": "a date", "datetime": "a date and time", "bytes": "binary data", "set": "a set"}


def _template(r: _Reader, node: Any, where: str) -> Any:
    """A JSON value whose strings may hold ``{field.path}`` placeholders (checked here)."""
    value = _plain(r, node, where)

    def check(v: Any, at: str) -> None:
        if isinstance(v, str):
            for name in _TEMPLATE_FIELD.findall(v):
                if not _FIELD_PATH.match(name):
                    raise r.fail(
                        node, f"{at}: {{{name}}} is not a field name (use e.g. {{owner}} or {{head.ref}})"
                    )
        elif isinstance(v, dict):
            for k, item in v.items():
                if not isinstance(k, str):
                    raise r.fail(node, f"{at}: the key {k!r} is not text; quote it")
                check(item, f"{at}.{k}")
        elif isinstance(v, list):
            for i, item in enumerate(v):
                check(item, f"{at}[{i}]")
        elif not isinstance(v, int | float | bool) and v is not None:  # a date, !!binary, !!set...
            what = _NOT_JSON.get(type(v).__name__, type(v).__name__)
            raise r.fail(node, f"{at} reads as {what}, which JSON has no value for; quote it to make it text")

    check(value, where)
    return value


def _plain(r: _Reader, node: Any, where: str) -> Any:
    value = r.value(node, where)
    if not isinstance(value, str | int | float | bool | dict | list) or value is None:
        raise r.fail(node, f"{where} must be a value, a list or a mapping")
    return value


def _names(r: _Reader, node: Any, where: str) -> tuple[str, ...]:
    import yaml

    items = node.value if isinstance(node, yaml.SequenceNode) else [node]
    return tuple(r.string(item, where) for item in items)


def _templates(r: _Reader, node: Any, where: str) -> dict[str, str]:
    out = {}
    for k, v in r.mapping(node, where, ()).items():
        text = _template(r, v, f"{where}.{k}")
        if not isinstance(text, str):
            raise r.fail(v, f'{where}.{k} must be a text template such as "{{head}}"')
        out[k] = text
    return out


def _mcp_find(r: _Reader, node: Any, where: str) -> McpFind:
    opts = r.mapping(node, where, ("tool", "arguments", "items", "match", "similar", "ref", "result"))
    if "tool" not in opts:
        raise r.fail(node, f"{where} needs 'tool': the upstream read tool that lists the effects")
    arguments = _template(r, opts["arguments"], f"{where}.arguments") if "arguments" in opts else {}
    if not isinstance(arguments, dict):
        raise r.fail(opts["arguments"], f"{where}.arguments must be a mapping of argument names to templates")
    return McpFind(
        tool=r.string(opts["tool"], f"{where}.tool"),
        arguments=arguments,
        items=r.string(opts["items"], f"{where}.items") if "items" in opts else None,
        match=_templates(r, opts["match"], f"{where}.match") if "match" in opts else {},
        similar=_templates(r, opts["similar"], f"{where}.similar") if "similar" in opts else {},
        ref=r.string(opts["ref"], f"{where}.ref") if "ref" in opts else None,
        result=_template(r, opts["result"], f"{where}.result") if "result" in opts else None,
    )


def _mcp_rule(r: _Reader, node: Any, where: str) -> McpToolRule:
    from gitledger.core.policy import ON_UNCONFIRMED

    fields: tuple[str, ...] = ("guard", "key", "casefold", "owner_prefix", "task", "similar", "ref", "find")
    fields += ("on_unconfirmed", "lease")
    opts = r.mapping(node, where, fields)
    rule: dict[str, Any] = {}
    if "guard" in opts:
        guard = r.scalar(opts["guard"], f"{where}.guard")
        if not isinstance(guard, bool):
            raise r.fail(opts["guard"], f"{where}.guard must be true or false")
        rule["guard"] = guard
    if "key" in opts:
        rule["key"] = _names(r, opts["key"], f"{where}.key")
    if "casefold" in opts:
        rule["casefold"] = _names(r, opts["casefold"], f"{where}.casefold")
    if "owner_prefix" in opts:
        where_prefix = f"{where}.owner_prefix"
        rule["owner_prefix"] = {
            name: r.string(owner, f"{where_prefix}.{name}")
            for name, owner in r.mapping(opts["owner_prefix"], where_prefix, ()).items()
        }
    if "task" in opts:
        rule["task"] = r.string(opts["task"], f"{where}.task", ("required", "optional"))
    if "similar" in opts:
        rule["similar"] = r.string(opts["similar"], f"{where}.similar")
    if "ref" in opts:
        rule["ref"] = r.string(opts["ref"], f"{where}.ref")
    if "find" in opts:
        rule["find"] = _mcp_find(r, opts["find"], f"{where}.find")
    if "on_unconfirmed" in opts:
        rule["on_unconfirmed"] = r.string(opts["on_unconfirmed"], f"{where}.on_unconfirmed", ON_UNCONFIRMED)
    if "lease" in opts:
        rule["lease"] = r.seconds(opts["lease"], f"{where}.lease")
    return McpToolRule(**rule)


def _mcp_profile(r: _Reader, node: Any, name: str, where: str) -> McpProfile:
    opts = r.mapping(node, where, ("description", "tools"))
    tools = {
        tool: _mcp_rule(r, rule, f"{where}.tools.{tool}")
        for tool, rule in (r.mapping(opts["tools"], f"{where}.tools", ()).items() if "tools" in opts else ())
    }
    description = r.string(opts["description"], f"{where}.description") if "description" in opts else ""
    return McpProfile(name, description, tools)


def load_mcp_profile(path: Path, name: str) -> McpProfile:
    """A packaged MCP proxy profile (``gitledger/mcp/profiles/NAME.yaml``): the same format as one entry
    of ``mcp.profiles`` in .gitledger.yml."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
        root = _compose(text, path)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read this MCP profile ({exc}); reinstall gitledger") from exc
    if root is None:
        return McpProfile(name)
    r = _Reader(path)
    r.measure(root)
    return _mcp_profile(r, root, name, "the profile")


def load(directory: Path | None) -> Config:
    """The config of the repository whose top is ``directory``; defaults when there is no file."""
    if directory is None:
        return Config()
    path = directory / FILENAME
    try:
        if path.exists() and not path.is_file():  # a pipe would block the open, a device never end
            raise ConfigError(f"{path}: it is not a regular file; put the settings in one")
        with path.open(encoding="utf-8") as fh:
            text = fh.read(_MAX_CHARS + 1)  # parse() refuses a larger one: /dev/zero too
    except FileNotFoundError:
        return Config()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it ({exc}); fix its permissions or encoding") from exc
    return parse(text, path)
