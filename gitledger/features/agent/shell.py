"""Shell command lines as the agent guard reads them: simple commands as word lists, here-documents.

Nothing is executed or expanded: :func:`split_commands` cuts a line into simple commands at ``&&``,
``||``, ``;``, ``|``, newlines and parentheses (not at a quoted ``';'``), reading words as
:mod:`shlex` does, in linear time; :func:`lift_heredocs` first takes the lines of here-documents out
(they are input, not commands) and :func:`stdin_of` gives a command the text of its here-document or
here-string. Standard library only: the agent hook imports this for every call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_BLANKS = " \t\r"
_PUNCTUATION = ";&|\n()"  # an unquoted parenthesis is an operator to bash too: "(gh …)" is a subshell
_OPERATOR_RUN = r"[;&|\n()]+"
_PLAIN_RUN = r"[^ \t\r;&|\n()'\"\\$]+"
_DOUBLE_RUN = r'[^"\\]+'
_ASSIGNMENT = r"^[A-Za-z_][A-Za-z0-9_]*="
_HEREDOC = "<<gitledger-heredoc-"  # the word a lifted here-document leaves in its command
_HEREDOC_START = r"<<(-?)[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|([A-Za-z0-9_.-]+))"
# "$(cat <<'EOF' … EOF)" as a --body value, the way coding agents write multi-line bodies
_SUBSTITUTED_HEREDOC = (
    r"^\$\(\s*cat\s+<<(-?)[ \t]*(['\"]?)([A-Za-z0-9_]+)\2[ \t]*\n(.*?)\n[ \t]*\3[ \t]*\n\s*\)$"
)


def lift_heredocs(command: str) -> tuple[str, list[str]]:
    """The command line without the bodies of its here-documents, and the bodies.

    A body is input, not commands: each ``<<WORD`` (``<<-WORD``, ``<<'WORD'``) outside quotes and
    ``$(...)`` becomes the word ``<<gitledger-heredoc-N`` and its lines (up to the line ``WORD``) are
    taken out; ``bodies[N]`` is the text the command reads (quoted or not: nothing is expanded here).
    """
    if "<<" not in command:
        return command, []
    out: list[str] = []
    bodies: list[str] = []
    pending: list[tuple[str, bool]] = []  # (delimiter, strip leading tabs) of the current line
    quote = ""
    depth = 0  # $( ... ) outside single quotes
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\" and i + 1 < n:
            out.append(command[i : i + 2])
            i += 2
            continue
        elif quote == '"':
            if c == '"':
                quote = ""
            elif command.startswith("$(", i):
                depth += 1
            elif c == ")" and depth:
                depth -= 1
        elif c in "'\"":
            quote = c
        elif command.startswith("$(", i):
            depth += 1
        elif c == ")" and depth:
            depth -= 1
        elif command.startswith("<<<", i):  # a here-string: one word, read by _stdin
            out.append("<<<")
            i += 3
            continue
        elif c == "<" and not depth and command.startswith("<<", i):
            found = re.compile(_HEREDOC_START).match(command, i)  # not command[i:]: no copy per "<<"
            if found:
                out.append(f"{_HEREDOC}{len(bodies) + len(pending)}")
                pending.append(_heredoc_start(found))
                i = found.end()
                continue
        elif c == "\n" and pending:
            out.append(c)
            i += 1
            for delimiter, tabs in pending:
                lines, i = _heredoc_lines(command, i, delimiter, tabs)
                bodies.append("".join(line + "\n" for line in lines))
            pending = []
            continue
        out.append(c)
        i += 1
    bodies.extend("" for _ in pending)  # a here-document without its lines (the shell reads nothing)
    return "".join(out), bodies


def _heredoc_start(found: re.Match[str]) -> tuple[str, bool]:
    """(delimiter, strip leading tabs) of a ``<<WORD`` matched by :data:`_HEREDOC_START`."""
    return next(g for g in found.groups()[1:] if g is not None), found.group(1) == "-"


def _heredoc_lines(text: str, i: int, delimiter: str, tabs: bool) -> tuple[list[str], int]:
    """The lines of the here-document whose first line starts at ``text[i]`` (up to the line
    ``delimiter``; leading tabs stripped for ``<<-``), and the index after its delimiter line."""
    lines: list[str] = []
    n = len(text)
    while i < n:
        end = text.find("\n", i)
        line = text[i:] if end == -1 else text[i:end]
        i = n if end == -1 else end + 1
        if tabs:
            line = line.lstrip("\t")
        if line == delimiter:
            break
        lines.append(line)
    return lines, i


_SUBSTITUTION = "\x00gitledger-substitution-"  # the text a lifted $( ) or ` ` leaves in its word
_SUBSTITUTION_MARK = r"\x00gitledger-substitution-(\d+)\x00"
_SPECIAL = r"[\\'\"$`]"


def lift_substitutions(command: str) -> tuple[str, list[str]]:
    """The command line with each command substitution outside single quotes (``$( … )``, `` ` … ` ``)
    replaced by a mark, and their texts: the shell runs what they hold, so the guard reads it too
    (``URL=$(gh pr create …)``). :func:`substitutions_of` puts the texts back into a command's words
    and gives the scripts. One not closed is left as it is (the words then do not parse)."""
    if "$(" not in command and "`" not in command:
        return command, []
    out: list[str] = []
    texts: list[str] = []
    double = False
    i, n = 0, len(command)
    special = re.compile(_SPECIAL)
    while i < n:
        found = special.search(command, i)
        if found is None:
            out.append(command[i:])
            break
        j = found.start()
        out.append(command[i:j])
        c = command[j]
        if c == "\\":
            out.append(command[j : j + 2])
            i = j + 2
            continue
        if c == "'" and not double:
            end = command.find("'", j + 1)
            end = n - 1 if end == -1 else end
            out.append(command[j : end + 1])
            i = end + 1
            continue
        if c == '"':
            double = not double
        elif command.startswith("$(", j) or c == "`":
            try:
                end = _substitution_close(command, j)
            except ValueError:
                out.append(command[j:])
                break
            out.append(f"{_SUBSTITUTION}{len(texts)}\x00")
            texts.append(command[j:end])
            i = end
            continue
        out.append(c)
        i = j + 1
    return "".join(out), texts


def substitutions_of(words: list[str], texts: list[str]) -> tuple[list[str], list[str]]:
    """A command's words with the texts of their substitutions put back, and the scripts they run."""
    scripts: list[str] = []

    def back(found: re.Match[str]) -> str:
        n = int(found.group(1))
        if n >= len(texts):
            return found.group(0)
        text = texts[n]
        scripts.append(text[2:-1] if text.startswith("$(") else text[1:-1].replace("\\`", "`"))
        return text

    if not texts:
        return words, scripts
    mark = re.compile(_SUBSTITUTION_MARK)
    return [mark.sub(back, w) if _SUBSTITUTION in w else w for w in words], scripts


def _substitution_close(line: str, i: int) -> int:
    """The index after the substitution that starts at ``line[i]`` (``$(`` or a backquote): quotes,
    nested substitutions and here-documents inside it are followed. Raises ValueError when it is not
    closed."""
    if line[i] == "`":
        j = i + 1
        while j < len(line):
            if line[j] == "\\":
                j += 2
                continue
            if line[j] == "`":
                return j + 1
            j += 1
        raise ValueError("No closing backquote")
    depth, pending = 1, []
    j, n = i + 2, len(line)
    while j < n:
        c = line[j]
        if c == "\\":
            j += 2
        elif c == "'":
            end = line.find("'", j + 1)
            if end == -1:
                break
            j = end + 1
        elif c == '"':
            j += 1
            while j < n and line[j] != '"':
                if line[j] == "\\":
                    j += 2
                elif line.startswith("$(", j) or line[j] == "`":
                    j = _substitution_close(line, j)
                else:
                    j += 1
            j += 1
        elif line.startswith("$(", j) or c == "`":
            j = _substitution_close(line, j)
        elif line.startswith("<<<", j):
            j += 3
        elif line.startswith("<<", j) and (start := re.compile(_HEREDOC_START).match(line, j)):
            pending.append(_heredoc_start(start))
            j = start.end()
        elif c == "\n" and pending:
            j += 1
            for delimiter, tabs in pending:  # its lines are input: skip to the delimiter's line
                j = _heredoc_lines(line, j, delimiter, tabs)[1]
            pending = []
        else:
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if not depth:
                    return j + 1
            j += 1
    raise ValueError("No closing parenthesis")


def split_commands(command: str) -> Iterator[list[str]]:
    """The simple commands of a shell command line, as word lists (quotes removed, nothing expanded)."""
    # newlines separate commands, also with no blank around them ("main\ngit push": two commands)
    words: list[str] = []
    for word in _words(command):
        if word is None:
            if words:
                yield words
            words = []
        else:
            words.append(word)
    if words:
        yield words


def _words(line: str) -> Iterator[str | None]:
    """The words of ``line`` as ``shlex.shlex(line, posix=True, punctuation_chars=";&|\\n()")`` reads
    them with the blanks `` \\t\\r``, ``whitespace_split`` and no comments, and None for each run of
    operator characters (``&&``, ``;``, ``|``, a newline, a parenthesis). Unlike shlex, a quoted or
    escaped ``;`` or ``''`` stays a word, and the time is linear: shlex grows each token one character
    at a time, which is quadratic in its length (a long ``--body`` took seconds).

    The ``&`` of a redirection (``2>&1``, ``>&2``, ``&>log``) is part of its word, not an operator:
    the words after it stay the command's.

    Raises ValueError as shlex does: a quote not closed, a backslash at the end.
    """
    i, n = 0, len(line)
    while i < n:
        if line[i] in _BLANKS:
            i += 1
        elif line[i] in _PUNCTUATION and not _redirecting(line, i):
            i = _end_of_run(_OPERATOR_RUN, line, i)
            yield None
        else:
            parts: list[str] = []
            while i < n and line[i] not in _BLANKS and (line[i] not in _PUNCTUATION or _redirecting(line, i)):
                i = _word_part(line, i, parts)
            yield "".join(parts)


def _redirecting(line: str, i: int) -> bool:
    """Whether ``line[i]`` is the ``&`` of a redirection (``>&``, ``<&``, ``&>``)."""
    return line[i] == "&" and ((i > 0 and line[i - 1] in "<>") or line.startswith("&>", i))


def _word_part(line: str, i: int, parts: list[str]) -> int:
    """Append the text of the word part at ``line[i]`` (plain run, quoted string or escape) to
    ``parts``; the index after it."""
    c = line[i]
    if c == "'":
        end = line.find("'", i + 1)
        if end == -1:
            raise ValueError("No closing quotation")
        parts.append(line[i + 1 : end])
        return end + 1
    if c == "\\":
        if i + 1 == len(line):
            raise ValueError("No escaped character")
        parts.append(line[i + 1])
        return i + 2
    if line.startswith("$(", i):  # a command substitution is part of the word: $(git branch --show-current)
        end = _substitution_close(line, i)
        parts.append(line[i:end])
        return end
    if c != '"':
        end = _end_of_run(_PLAIN_RUN, line, i)
        parts.append(line[i:end])
        return end
    i += 1
    while i < len(line):
        c = line[i]
        if c == '"':
            return i + 1
        if c == "\\":
            if i + 1 == len(line):
                raise ValueError("No escaped character")
            escaped = line[i + 1]
            # in double quotes only the quote and the backslash itself are escaped (as shlex reads it)
            parts.append(escaped if escaped in '"\\' else "\\" + escaped)
            i += 2
        else:
            end = _end_of_run(_DOUBLE_RUN, line, i)
            parts.append(line[i:end])
            i = end
    raise ValueError("No closing quotation")


def _end_of_run(pattern: str, line: str, i: int) -> int:
    """Where the run of ``pattern`` that starts at ``line[i]`` ends (callers know it has one character)."""
    found = re.compile(pattern).match(line, i)
    return found.end() if found else i + 1


def substituted_heredoc(value: str) -> str | None:
    """The text a ``"$(cat <<'EOF' … EOF)"`` value gives (the way coding agents write multi-line
    bodies), or None when the value is not one."""
    found = re.match(_SUBSTITUTED_HEREDOC, value, re.DOTALL)
    if found is None:
        return None
    lines = found.group(4).split("\n")
    if found.group(1):
        lines = [line.lstrip("\t") for line in lines]
    return "\n".join(lines).rstrip("\n")  # $( ) drops the trailing newlines


def stdin_of(words: list[str], bodies: list[str]) -> tuple[list[str], str | None]:
    """A command's words without its here-document or here-string, and the text it reads from it."""
    kept: list[str] = []
    stdin = None
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith(_HEREDOC) and word[len(_HEREDOC) :].isdigit():
            stdin = bodies[int(word[len(_HEREDOC) :])]
        elif word == "<<<" and i + 1 < len(words):
            stdin = words[i + 1] + "\n"
            i += 1
        elif word.startswith("<<<"):
            stdin = word[3:] + "\n"
        else:
            kept.append(word)
        i += 1
    return kept, stdin


# words that open or close a compound command or negate one: the simple command follows them
_KEYWORDS = frozenset({"{", "}", "!", "if", "then", "elif", "else", "fi", "do", "done", "while", "until"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})  # run the script given with -c
_PROGRAMS = frozenset({"gh", "git", *SHELLS})  # named by their path too (/usr/bin/gh)
_ENV_VALUE_OPTIONS = frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"})
_EXEC_VALUE_OPTIONS = frozenset({"-a"})
_TIMEOUT_VALUE_OPTIONS = frozenset({"-s", "--signal", "-k", "--kill-after"})
_SHELL_VALUE_OPTIONS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def strip_assignments(words: list[str], env: dict[str, str]) -> list[str]:
    """``words`` without their leading ``NAME=value`` words, which go into ``env``."""
    i = 0
    while i < len(words) and re.match(_ASSIGNMENT, words[i]):
        name, _, value = words[i].partition("=")
        env[name] = value
        i += 1
    return words[i:]


def command_run(words: list[str], env: dict[str, str]) -> list[str]:
    """The words of the program a simple command runs: past the keywords around it (``if``, ``then``,
    ``{``, ``!`` …), its ``NAME=value`` assignments (into ``env``) and the wrappers that run their
    arguments (``command``, ``exec``, ``nohup``, ``time``, ``env``, ``timeout``); ``gh``, ``git`` or a
    shell named by its path (``/usr/bin/gh``) by its name. Empty when it runs nothing (``command -v``,
    ``export NAME=value``, assignments alone: then ``env`` holds what later commands see)."""
    while words:
        head = words[0]
        if head in _KEYWORDS:
            words = words[1:]
        elif re.match(_ASSIGNMENT, head):
            words = strip_assignments(words, env)
        elif head in ("command", "exec", "nohup", "builtin"):
            if head == "command" and words[1:2] in (["-v"], ["-V"]):
                return []  # prints where the program is, runs nothing
            words = _past_options(words[1:], _EXEC_VALUE_OPTIONS)  # command -p, exec -c / -l / -a NAME
        elif head == "time":
            words = words[2:] if words[1:2] == ["-p"] else words[1:]
        elif head == "env":
            words = _past_options(words[1:], _ENV_VALUE_OPTIONS)
            words = strip_assignments(words, env)
        elif head == "timeout":
            words = _past_options(words[1:], _TIMEOUT_VALUE_OPTIONS)[1:]  # and the duration
        elif head == "export":  # export NAME=value …: for the commands after it; runs nothing
            for word in words[1:]:
                strip_assignments([word], env)
            return []
        else:
            break
    if words and "/" in words[0] and words[0].rsplit("/", 1)[1] in _PROGRAMS:
        words = [words[0].rsplit("/", 1)[1], *words[1:]]
    return words


def _past_options(words: list[str], value_options: frozenset[str]) -> list[str]:
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        if words[i] == "--":
            return words[i + 1 :]
        i += 2 if words[i] in value_options else 1
    return words[i:]


def shell_script(args: list[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` (``bash -lc``, ``bash -o pipefail -c`` …) from the shell's
    arguments; None when they give no ``-c``."""
    given = False
    i = 0
    while i < len(args) and args[i][:1] in "-+" and args[i] not in ("-", "+"):
        word = args[i]
        if word == "--":
            i += 1
            break
        if word in _SHELL_VALUE_OPTIONS:
            i += 2
            continue
        given = given or (not word.startswith("--") and "c" in word[1:])
        i += 1
    return args[i] if given and i < len(args) else None


__all__ = [
    "SHELLS",
    "command_run",
    "lift_heredocs",
    "lift_substitutions",
    "shell_script",
    "split_commands",
    "stdin_of",
    "strip_assignments",
    "substituted_heredoc",
    "substitutions_of",
]
