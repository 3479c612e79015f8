"""Recognise the GitHub side effect of a tool call, without running anything.

Shell commands are split with :mod:`shlex` (never executed, never expanded): a command line is cut into
simple commands at ``&&``, ``||``, ``;``, ``|``, newlines and parentheses, leading ``VAR=value``
assignments are dropped (``GH_REPO=`` is read; ``export`` keeps it for the next commands), and a leading
``cd DIR`` moves the directory the next commands run in. A command is read as the program it runs: past
``if``/``then``/``{``/``!``, the wrappers ``command``, ``exec``, ``nohup``, ``time``, ``env`` and
``timeout``, a path (``/usr/bin/gh``), into the script of ``sh -c`` / ``bash -lc``, of ``eval`` and of
``bash <<EOF``, and into command substitutions (``$( … )``, backquotes; three deep; deeper is refused).
Recognised (docs/agents.md, "What is guarded"):

- ``gh pr create``, alias ``gh pr new`` (``--head/-H``, ``--base/-B``, ``--title/-t``, ``--body/-b``,
  ``--body-file/-F``, ``--repo/-R``; ``--dry-run`` and ``--web`` make none)
- ``gh pr comment N`` / ``gh issue comment N`` (``--body/-b``, ``--body-file/-F``; ``--edit-last`` is
  an edit, not a new comment)
- ``gh issue create``, alias ``gh issue new`` (``--title/-t``, ``--body/-b``, ``--body-file/-F``)
- ``gh api`` POSTs (``-X POST``, or any ``-f``/``-F`` field) to ``repos/O/R/pulls``,
  ``repos/O/R/issues`` and ``repos/O/R/issues/N/comments`` (``{owner}/{repo}`` placeholders too, or
  a whole URL); ``gh api graphql`` with a ``createPullRequest``, ``addComment`` or ``createIssue``
  mutation is refused (it cannot be keyed)
- ``git push [REMOTE] [REFSPEC…]``, also after git's own options (``git -C DIR -c k=v push``) (no
  refspec: the current branch; ``--delete``, ``--tags`` and ``--mirror`` are not branch creations)
- GitHub MCP server tools (``mcp__github__…``, also ``mcp__plugin_*_github__…``):
  ``create_pull_request``, ``add_issue_comment``, ``create_issue``, ``issue_write`` (method create),
  ``create_branch``, ``push_files``, ``create_or_update_file``
- the rules of ``agent.rules`` in ``.gitledger.yml``.

Standard library only: the hook imports this for every call, recognised or not.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gitledger.core.effects import COMMENT, ISSUE, PR, PUSH, REQUIRED, Effect
from gitledger.features.agent.gitcmd import at, git_options, git_push, is_current_branch
from gitledger.features.agent.shell import (
    SHELLS,
    command_run,
    lift_heredocs,
    lift_substitutions,
    shell_script,
    split_commands,
    stdin_of,
    substituted_heredoc,
    substitutions_of,
)

if TYPE_CHECKING:
    from gitledger.config import AgentRule

SHELL_TOOLS = frozenset({"Bash", "bash", "shell", "local_shell", "exec_command", "run_shell_command"})
# patterns as text: re compiles (and caches) one on first use, so a hook call pays only for those
# it uses
_MCP_GITHUB = r"^mcp__(?:github|plugin_[A-Za-z0-9_-]*_github)__(?P<tool>[A-Za-z0-9_]+)$"
_API_PATH = (
    r"^/?repos/(?P<owner>[^/\s]+)/(?P<name>[^/\s]+)/"
    r"(?:(?P<pulls>pulls)|issues(?:/(?P<number>\d+)/comments)?)/?$"
)
_API_HOST = r"^https?://[^/]+(?:/api/v3)?"
_GH_API_SHORT = frozenset({"-X", "-f", "-F", "-H", "-q", "-t", "-p"})  # gh api options that take a value
_GRAPHQL_CREATES = r"\b(createPullRequest|addComment|createIssue)\b"
_GH_FOR = {PR: "pr create", COMMENT: "pr comment / gh issue comment", ISSUE: "issue create"}
_MAX_NESTED = 3  # sh -c scripts inside sh -c scripts read (deeper: refused)
_ISSUE_URL = r"/(?P<owner>[^/\s]+)/(?P<name>[^/\s]+)/(?:pull|issues)/(?P<number>\d+)"

# gh options that take a value, per subcommand (anything else is a flag)
_GH_VALUE_OPTIONS: dict[str, dict[str, str]] = {
    "pr create": {
        "-H": "head",
        "--head": "head",
        "-B": "base",
        "--base": "base",
        "-t": "title",
        "--title": "title",
        "-b": "body",
        "--body": "body",
        "-F": "body_file",
        "--body-file": "body_file",
        "-R": "repo",
        "--repo": "repo",
        "-a": "",
        "--assignee": "",
        "-l": "",
        "--label": "",
        "-m": "",
        "--milestone": "",
        "-p": "",
        "--project": "",
        "-r": "",
        "--reviewer": "",
        "-T": "",
        "--template": "",
        "--recover": "",
    },
    "comment": {
        "-b": "body",
        "--body": "body",
        "-F": "body_file",
        "--body-file": "body_file",
        "-R": "repo",
        "--repo": "repo",
    },
    "issue create": {
        "-t": "title",
        "--title": "title",
        "-b": "body",
        "--body": "body",
        "-F": "body_file",
        "--body-file": "body_file",
        "-R": "repo",
        "--repo": "repo",
        "-a": "",
        "--assignee": "",
        "-l": "",
        "--label": "",
        "-m": "",
        "--milestone": "",
        "-p": "",
        "--project": "",
        "-T": "",
        "--template": "",
        "--recover": "",
    },
}


def _options(
    words: Sequence[str], value_options: Mapping[str, str]
) -> tuple[dict[str, str], list[str], set[str]]:
    """(named values, positional words, flags) of ``words`` under ``value_options``."""
    values: dict[str, str] = {}
    positional: list[str] = []
    flags: set[str] = set()
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            positional.extend(words[i + 1 :])
            break
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if name in value_options:
            if eq:
                value = inline
            elif i + 1 < len(words):
                value = words[i + 1]
                i += 1
            else:
                value = ""
            if value_options[name]:
                values[value_options[name]] = value
        elif word.startswith("-") and not word.startswith("--") and len(word) > 2:
            # short options in one word, as gh (pflag) reads them: -Hbranch, -H=branch, -fH branch
            for j in range(1, len(word)):
                short = "-" + word[j]
                if short not in value_options:
                    flags.add(short)
                    continue
                value = word[j + 1 :].removeprefix("=")
                if j + 1 == len(word) and i + 1 < len(words):
                    value = words[i + 1]
                    i += 1
                if value_options[short]:
                    values[value_options[short]] = value
                break
        elif word.startswith("-") and len(word) > 1:
            flags.add(name)
        else:
            positional.append(word)
        i += 1
    return values, positional, flags


def _gh(words: list[str], env: Mapping[str, str], cwd: str | None, stdin: str | None) -> Effect | None:
    args = words[1:]
    if args and args[0] in ("pr", "issue"):  # --repo is a flag of the group: gh issue -R o/r comment 5
        args = [args[0], *_group_repo_last(args[1:])]
    if len(args) >= 2 and args[0] in ("pr", "issue") and args[1] == "new":  # gh's alias of create
        args = [args[0], "create", *args[2:]]
    if len(args) >= 2 and args[0] == "pr" and args[1] == "create":
        values, _, flags = _options(args[2:], _GH_VALUE_OPTIONS["pr create"])
        if flags & {"--dry-run", "--web", "-w"}:
            return None  # prints what it would do, or opens a browser: no pull request
        head, unknown = _head(values.get("head"), "--head")
        repo = values.get("repo") or env.get("GH_REPO") or None
        return Effect(
            PR,
            "gh pr create",
            repo=_repo_arg(repo),
            head=head,
            base=values.get("base") or None,
            title=values.get("title"),
            body=_body(values, cwd, stdin),
            cwd=cwd,
            problems=unknown,
        )
    if len(args) >= 2 and args[0] in ("pr", "issue") and args[1] == "comment":
        values, positional, flags = _options(args[2:], _GH_VALUE_OPTIONS["comment"])
        if flags & {"--edit-last", "--delete-last", "--web", "-w"}:
            return None  # edits the last comment (or opens a browser): no new comment
        repo = _repo_arg(values.get("repo") or env.get("GH_REPO"))
        target, target_repo = _target(positional[0] if positional else "")
        problems: tuple[str, ...] = (
            () if target is not None else (f"the {args[0]} number in {' '.join(args[:3])!r}",)
        )
        if target is None and args[0] == "pr" and not positional:
            problems = ("the PR of the current branch (pass the PR number)",)
        body = _body(values, cwd, stdin)
        if body is None:
            problems += ("the comment body (pass --body, --body-file FILE or a here-document; not a pipe)",)
        return Effect(
            COMMENT,
            f"gh {args[0]} comment",
            repo=target_repo or repo,
            target=target,
            body=body,
            cwd=cwd,
            problems=problems,
        )
    if len(args) >= 2 and args[0] == "issue" and args[1] == "create":
        values, _, flags = _options(args[2:], _GH_VALUE_OPTIONS["issue create"])
        if flags & {"--web", "-w"}:
            return None  # opens a browser: no issue
        repo = _repo_arg(values.get("repo") or env.get("GH_REPO"))
        problems = () if values.get("title") else ("the issue title (pass --title)",)
        return Effect(
            ISSUE,
            "gh issue create",
            repo=repo,
            title=values.get("title"),
            body=_body(values, cwd, stdin),
            cwd=cwd,
            problems=problems,
        )
    if args and args[0] == "api":
        return _gh_api(args[1:], env, cwd, stdin)
    return None


def _group_repo_last(args: list[str]) -> list[str]:
    """``args`` of ``gh pr`` / ``gh issue`` with a ``-R``/``--repo`` given before the subcommand moved
    after it, where the subcommand's options are read."""
    leading: list[str] = []
    while args and (args[0] in ("-R", "--repo") or args[0].startswith(("-R", "--repo="))):
        take = 2 if args[0] in ("-R", "--repo") else 1
        leading, args = leading + args[:take], args[take:]
    return [*args[:1], *leading, *args[1:]] if leading else args


def _gh_api(args: list[str], env: Mapping[str, str], cwd: str | None, stdin: str | None) -> Effect | None:
    method: str | None = None
    fields: dict[str, str] = {}
    unread: list[str] = []  # -F NAME=@FILE fields whose file cannot be read
    path: str | None = None
    has_input = False
    i = 0
    while i < len(args):
        word = args[i]
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if not word.startswith("--") and len(word) > 2 and word[:2] in _GH_API_SHORT:
            name = word[:2]  # -XPOST, -X=POST, -fbody=x: the value attached, as pflag reads it
        takes_value = name in (
            "-X",
            "--method",
            "-f",
            "--raw-field",
            "-F",
            "--field",
            "-H",
            "--header",
            "--input",
            "-q",
            "--jq",
            "-t",
            "--template",
            "--hostname",
            "--cache",
            "-p",
            "--preview",
        )
        if takes_value:
            if eq:
                value = inline
            elif len(word) > 2 and not word.startswith("--"):
                value = word[2:].removeprefix("=")  # -XPOST, -X=POST
            else:
                i += 1
                value = args[i] if i < len(args) else ""
            if name in ("-X", "--method"):
                method = value.upper()
            elif name in ("-f", "--raw-field", "-F", "--field"):
                key, _, val = value.partition("=")
                key = key.rstrip("[]")
                if name in ("-F", "--field") and val.startswith("@") and key != "query":
                    text = _body({"body_file": val[1:]}, cwd, stdin)  # gh reads @FILE (@-: stdin)
                    if text is None:
                        unread.append(f"the {key} field ({name} {value} cannot be read)")
                    val = val if text is None else text
                fields[key] = val
            elif name == "--input":
                has_input = True
        elif not word.startswith("-") and path is None:
            path = word
        i += 1
    if path is None:
        return None
    path = re.sub(_API_HOST, "", path)  # gh api takes a whole URL too
    if path.strip("/") == "graphql":
        return _graphql(fields, has_input, cwd)
    if method is None:
        method = "POST" if fields or has_input else "GET"
    if method != "POST":
        return None
    match = re.match(_API_PATH, path.split("?", 1)[0])
    if match is None:
        return None
    owner, name = match["owner"], match["name"]
    repo = None if "{" in owner or "{" in name else f"{owner}/{name}"
    repo = repo or _repo_arg(env.get("GH_REPO"))
    problems = tuple(unread)
    if has_input and not fields:
        problems = ("the request fields (pass them with -f/-F instead of --input)",)
    if match["pulls"]:
        head, bad_head = _head(fields.get("head"), "-f head")
        problems = problems or bad_head
        return Effect(
            PR,
            "gh api POST .../pulls",
            repo=repo,
            head=head,
            base=fields.get("base"),
            title=fields.get("title"),
            body=fields.get("body"),
            cwd=cwd,
            problems=problems or (() if fields.get("head") else ("the head branch (-f head=BRANCH)",)),
        )
    if match["number"]:
        return Effect(
            COMMENT,
            "gh api POST .../comments",
            repo=repo,
            target=int(match["number"]),
            body=fields.get("body"),
            cwd=cwd,
            problems=problems or (() if fields.get("body") else ("the comment body (-f body=...)",)),
        )
    return Effect(
        ISSUE,
        "gh api POST .../issues",
        repo=repo,
        title=fields.get("title"),
        body=fields.get("body"),
        cwd=cwd,
        problems=problems or (() if fields.get("title") else ("the issue title (-f title=...)",)),
    )


def _graphql(fields: Mapping[str, str], has_input: bool, cwd: str | None) -> Effect | None:
    """A GraphQL mutation that makes a PR, a comment or an issue cannot be keyed: refused with the reason."""
    query = fields.get("query")
    if query is not None and query.startswith("@"):  # -F query=@file
        query = _body({"body_file": query[1:]}, cwd, None)
    if query is None:
        if not has_input and "query" not in fields:
            return None
        problem = "the GraphQL query (pass it with -f query=...)"
        return Effect(PR, "gh api graphql", problems=(problem,))
    found = re.search(_GRAPHQL_CREATES, query)
    if found is None or not re.search(r"\bmutation\b", query):
        return None
    kind = {"createPullRequest": PR, "addComment": COMMENT, "createIssue": ISSUE}[found.group(1)]
    problem = f"what a GraphQL {found.group(1)} mutation makes (use gh {_GH_FOR[kind]} instead)"
    return Effect(kind, "gh api graphql", problems=(problem,))


def _repo_arg(value: str | None) -> str | None:
    """OWNER/NAME from ``-R``/``GH_REPO`` (which may be HOST/OWNER/NAME or a URL)."""
    if not value:
        return None
    text = value.strip().rstrip("/").removesuffix(".git")
    parts = [p for p in re.split(r"[/:]", text) if p]
    return "/".join(parts[-2:]) if len(parts) >= 2 else None


def _target(word: str) -> tuple[int | None, str | None]:
    """(number, OWNER/NAME) of a comment target: ``12``, ``#12`` or an issue/PR URL."""
    text = word.strip().lstrip("#")
    if text.isascii() and text.isdigit():  # as gh reads a number (not "²" or "٣")
        return int(text), None
    match = re.search(_ISSUE_URL, text)
    if match:
        return int(match["number"]), f"{match['owner']}/{match['name']}"
    return None, None


def _body(values: Mapping[str, str], cwd: str | None, stdin: str | None) -> str | None:
    """The body a ``gh`` command posts: ``--body`` (a ``"$(cat <<'EOF' … EOF)"`` there is the text
    it gives), ``--body-file -`` (its here-document or here-string; None when it reads a pipe) or
    ``--body-file PATH``."""
    if "body" in values:
        text = substituted_heredoc(values["body"])
        return values["body"] if text is None else text
    path = values.get("body_file")
    if not path:
        return None
    if path == "-":
        return stdin
    try:
        with open(at(cwd, path), encoding="utf-8", errors="replace") as fh:
            return fh.read(65536)
    except OSError:
        return None


# -- MCP tools --------------------------------------------------------------------------------------


def _str(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():  # JSON's 5.0 is 5 (as the MCP proxy reads it)
        return str(int(value))
    return None


def _head(value: str | None, option: str) -> tuple[str | None, tuple[str, ...]]:
    """(the head branch a command names, what cannot be told about it). ``OWNER:branch`` is the branch;
    a substitution of git's current branch is the current branch, as no head at all (None); any other
    shell expansion would be keyed on its text, which a retry spells otherwise: refused."""
    if not value or is_current_branch(value):
        return None, ()
    if "$" in value or "`" in value:
        return value, (f"the head branch ({option} {value!r} is expanded by the shell: write the branch)",)
    return value.split(":", 1)[1] if ":" in value else value, ()


def _mcp_repo(args: Mapping[str, Any]) -> str | None:
    owner, repo = _str(args.get("owner")), _str(args.get("repo"))
    if owner and repo:
        return f"{owner}/{repo}"
    return repo if repo and "/" in repo else None


def _mcp(tool: str, name: str, args: Mapping[str, Any]) -> list[Effect]:
    repo = _mcp_repo(args)
    if tool == "create_pull_request":
        head = _str(args.get("head"))
        if head and ":" in head:
            head = head.split(":", 1)[1]
        return [
            Effect(
                PR,
                name,
                repo=repo,
                head=head,
                base=_str(args.get("base")),
                title=_str(args.get("title")),
                body=_str(args.get("body")),
            )
        ]
    if tool == "add_issue_comment":
        number = _str(args.get("issue_number"))
        return [
            Effect(
                COMMENT,
                name,
                repo=repo,
                target=int(number) if number and number.isascii() and number.isdigit() else None,
                body=_str(args.get("body")),
            )
        ]
    if tool == "create_issue" or (tool == "issue_write" and _str(args.get("method")) == "create"):
        return [Effect(ISSUE, name, repo=repo, title=_str(args.get("title")), body=_str(args.get("body")))]
    if tool in ("create_branch", "push_files", "create_or_update_file"):
        return [Effect(PUSH, name, repo=repo, branch=_str(args.get("branch")))]
    return []


# -- rules from .gitledger.yml ----------------------------------------------------------------------


def _from_rule(rule: AgentRule, source: str, get: Any, cwd: str | None) -> Effect:
    values: dict[str, Any] = {}
    for field_name, where in rule.fields:
        value = get(where)
        if value is not None:
            values[field_name] = value
    owner = _str(values.pop("owner", None))
    repo = _str(values.get("repo"))
    if owner and repo and "/" not in repo:
        values["repo"] = f"{owner}/{repo}"
    if "target" in values:
        target = _str(values["target"])
        values["target"] = int(target) if target and target.isascii() and target.isdigit() else None
    for key in ("head", "base", "branch", "title", "body", "repo"):
        if key in values:
            values[key] = _str(values[key])
    return Effect(rule.effect, source, cwd=cwd, **values)


def _rule_for_tool(rule: AgentRule, tool_name: str, args: Mapping[str, Any]) -> Effect | None:
    if rule.tool is None or not re.fullmatch(rule.tool, tool_name):
        return None

    def get(path: str) -> Any:
        value: Any = args
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        return value

    return _from_rule(rule, tool_name, get, None)


def _rule_for_words(rule: AgentRule, words: list[str], cwd: str | None) -> Effect | None:
    if rule.command is None or tuple(words[: len(rule.command)]) != rule.command:
        return None
    rest = words[len(rule.command) :]
    options = {where: "x" for _, where in rule.fields if where.startswith("-")}
    values, positional, _ = _options(rest, {o: o for o in options})

    def get(where: str) -> Any:
        if where.startswith("-"):
            return values.get(where)
        if where.startswith("arg") and where[3:].isdecimal():
            n = int(where[3:])
            return positional[n - 1] if 0 < n <= len(positional) else None
        return None

    return _from_rule(rule, " ".join(rule.command), get, cwd)


# -- entry point ------------------------------------------------------------------------------------


def recognise(
    tool_name: str | None,
    tool_input: Mapping[str, Any],
    cwd: str | None,
    rules: Sequence[AgentRule] = (),
) -> list[Effect]:
    """The side effects this tool call would have (empty: nothing the guard looks at)."""
    if not tool_name:
        return []
    effects: list[Effect] = []
    for rule in rules:
        effect = _rule_for_tool(rule, tool_name, tool_input)
        if effect is not None:
            effects.append(effect)
    if effects:
        return [_complete(e) for e in effects]
    match = re.match(_MCP_GITHUB, tool_name)
    if match:
        return [_complete(e) for e in _mcp(match["tool"], tool_name, tool_input)]
    command = tool_input.get("command")
    if tool_name not in SHELL_TOOLS and not (isinstance(command, str) and "shell" in tool_name.lower()):
        return []
    if isinstance(command, list):  # Codex may pass argv
        command = shlex.join(str(w) for w in command)
    if not isinstance(command, str):
        return []
    return [_complete(e) for e in recognise_command(command, cwd, rules)]


def recognise_command(
    command: str,
    cwd: str | None,
    rules: Sequence[AgentRule] = (),
    nested: int = 0,
    exported: Mapping[str, str] | None = None,
) -> list[Effect]:
    """The side effects of a shell command line (see the module documentation); ``nested``: how many
    ``sh -c`` scripts this line is inside; ``exported``: the variables the line starts with."""
    if not any(word in command for word in ("gh", "git", *(r.command[0] for r in rules if r.command))):
        return []  # the common case, decided without a tokenizer
    command, bodies = lift_heredocs(command)
    line, substituted = lift_substitutions(command)
    try:
        commands = list(split_commands(line))
    except ValueError:
        # unbalanced quotes: the shell would refuse it too, unless it guards something we know
        if re.search(r"\bgh\s+(pr|issue|api)\b|\bgit\s+push\b", command):
            return [Effect(PR, "a shell command", problems=("the command (it does not parse)",))]
        return []
    effects: list[Effect] = []
    shell_env = dict(exported or {})
    here = cwd
    for words in commands:
        words, scripts = substitutions_of(words, substituted)
        for script in scripts:  # run before the command: URL=$(gh pr create …)
            effects.extend(_nested(script, here, rules, nested, shell_env))
        env = dict(shell_env)  # GH_REPO=o/r gh …: for this command only
        words = command_run(words, env)
        if not words:
            shell_env = env  # export GH_REPO=o/r, or assignments alone: for the commands after them
            continue
        if words[0] in SHELLS or words[0] == "eval":
            inner = " ".join(words[1:]) if words[0] == "eval" else shell_script(words[1:])
            if inner is None:  # bash <<'EOF' … EOF: the script is the here-document (or here-string)
                inner = _stdin_script(*stdin_of(words, bodies))
            if inner is not None:
                effects.extend(_nested(inner, here, rules, nested, env))
            continue
        if words[0] == "cd" and len(words) == 2:
            here = at(here, words[1])
            continue
        matched = False
        for rule in rules:
            effect = _rule_for_words(rule, words, here)
            if effect is not None:
                effects.append(effect)
                matched = True
        if matched:
            continue
        words, stdin = stdin_of(words, bodies)
        if words[0] == "gh":
            effect = _gh(words, env, here, stdin)
            if effect is not None:
                effects.append(effect)
        elif words[0] == "git":
            words, where = git_options(words, here)
            if len(words) >= 2 and words[1] == "push":
                effects.extend(git_push(words, where))
    return effects


def _stdin_script(words: list[str], stdin: str | None) -> str | None:
    """The script a shell reads from its here-document: ``bash <<EOF``, ``sh -s -- ARG <<< "…"``."""
    options = []
    for word in words[1:]:
        if word == "--" or word[:1] not in "-+":
            break
        options.append(word)
    given = words[1 + len(options) :]
    return stdin if stdin is not None and (not given or given[0] == "--" or "-s" in options) else None


def _nested(
    script: str, cwd: str | None, rules: Sequence[AgentRule], nested: int, env: Mapping[str, str]
) -> list[Effect]:
    """The effects of a script the command line runs (``sh -c``, a substitution), three deep at most."""
    if nested < _MAX_NESTED:
        return recognise_command(script, cwd, rules, nested + 1, env)
    if re.search(r"\bgh\b|\bgit\b", script):
        problem = f"the command (more than {_MAX_NESTED} shells deep)"
        return [Effect(PR, "a shell command", problems=(problem,))]
    return []


def _complete(effect: Effect) -> Effect:
    """Name what a recognised effect lacks to be keyed (rules may leave fields out)."""
    missing = [f for f in REQUIRED[effect.kind] if getattr(effect, f) is None]
    # a PR's head and a push's branch default to the current branch; a comment needs its target and body
    missing = [f for f in missing if not (f == "head" and effect.kind == PR)]
    missing = [f for f in missing if not (f == "branch" and effect.kind == PUSH)]
    if not missing or effect.problems:
        return effect
    return effect._replace(problems=tuple(f"the {f}" for f in missing))


__all__ = ["SHELL_TOOLS", "recognise", "recognise_command"]
