"""``git`` command lines as the agent guard reads them: git's own options before its command
(``git -C DIR -c k=v push``), ``git push [REMOTE] [REFSPEC…]`` as the branches it may create, and
the substitutions that name the current branch (``$(git branch --show-current)``).

Standard library only: the agent hook imports this for every call.
"""

from __future__ import annotations

import re

from gitledger.core.effects import PUSH, Effect

# (--force-with-lease and --signed take a value only after "=")
_GIT_PUSH_VALUE_OPTIONS = frozenset({"--repo", "--receive-pack", "--exec", "-o", "--push-option"})


# a substitution of git's current branch: $(git branch --show-current), `git rev-parse --abbrev-ref HEAD`
# (text: re compiles it on first use, so a hook call that reads no head or push pays nothing for it)
_CURRENT_BRANCH = (
    r"(?:\$\(|`)\s*git\s+(?:branch\s+--show-current|rev-parse\s+--abbrev-ref\s+HEAD|symbolic-ref\s+"
    r"(?:-q\s+)?--short\s+HEAD)\s*(?:\)|`)"
)


def is_current_branch(text: str) -> bool:
    """Whether ``text`` is a substitution that gives the current branch."""
    return re.fullmatch(_CURRENT_BRANCH, text.strip()) is not None


def at(cwd: str | None, path: str) -> str:
    """``path`` as seen from ``cwd`` (``cd``, ``git -C``, ``--body-file``; an absolute one as it is, a
    leading ``~`` the home directory, as the shell expands it)."""
    import os

    path = os.path.expanduser(path) if path.startswith("~") else path
    return path if cwd is None else os.path.join(cwd, path)


def git_options(words: list[str], cwd: str | None) -> tuple[list[str], str | None]:
    """``git`` and its command without git's own options before it (``git -C DIR -c k=v push``), and the
    directory it runs in."""
    i = 1
    while i < len(words) and words[i].startswith("-"):
        word = words[i]
        if word in ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"):
            if word == "-C" and i + 1 < len(words):
                cwd = at(cwd, words[i + 1])
            i += 2
        else:
            i += 1
    return [words[0], *words[i:]], cwd


def git_push(words: list[str], cwd: str | None) -> list[Effect]:
    args = words[2:]
    positional: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word in ("--delete", "-d", "--tags", "--mirror", "--all", "--branches", "--prune"):
            return []  # no single new branch
        if word in _GIT_PUSH_VALUE_OPTIONS:
            i += 2
            continue
        if word == "--":
            positional.extend(args[i + 1 :])
            break
        if not word.startswith("-"):
            positional.append(word)
        i += 1
    remote = positional[0] if positional else None
    refspecs = positional[1:]
    if not refspecs:
        return [Effect(PUSH, "git push", branch=None, remote=remote, cwd=cwd)]
    effects = []
    for spec in refspecs:
        spec = spec.lstrip("+")
        src, _, dst = spec.partition(":")
        target = dst or src
        if not target or target.startswith("refs/tags/") or (src == "" and dst):  # ":branch" deletes
            continue
        target = target.removeprefix("refs/heads/")
        if target in ("HEAD", "@") or is_current_branch(target):  # the current branch
            target = ""
        effects.append(Effect(PUSH, "git push", branch=target or None, remote=remote, cwd=cwd))
    return effects


__all__ = ["at", "git_options", "git_push", "is_current_branch"]
