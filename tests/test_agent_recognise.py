"""How the agent guard reads shell commands: lines, here-documents and the bodies agents write."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest

from gitledger.core.effects import COMMENT, ISSUE, PR, PUSH
from gitledger.features.agent.recognise import recognise, recognise_command
from gitledger.features.agent.shell import lift_heredocs, split_commands


def test_one_command_per_line_even_without_blanks() -> None:
    effects = recognise_command("gh pr create --base main --title T\ngit push origin feature", "/r")
    assert [(e.kind, e.base, e.branch) for e in effects] == [(PR, "main", None), (PUSH, None, "feature")]


def test_a_quoted_word_keeps_its_newlines() -> None:
    # bash runs a command named "<newline>gh" here, which is not gh: nothing to guard
    assert recognise_command('"\ngh" pr create --base main --title T', "/r") == []
    (effect,) = recognise_command('gh pr create --base main --title "two\nlines"', "/r")
    assert effect.kind == PR and effect.base == "main"


def test_a_substituted_here_document_gives_its_text_as_the_body() -> None:
    command = (
        "gh pr comment 12 --body \"$(cat <<'EOF'\n## Summary\n- pages; fixes #3 && more | less\n\n"
        'Done.\nEOF\n)"'
    )
    (effect,) = recognise_command(command, "/r")
    assert effect.kind == COMMENT and effect.target == 12
    assert effect.body == "## Summary\n- pages; fixes #3 && more | less\n\nDone."
    (tabs,) = recognise_command('gh issue comment 7 --body "$(cat <<-EOF\n\t\tindented\n\tEOF\n)"', "/r")
    assert tabs.body == "indented"


def test_body_file_dash_reads_the_here_document_or_here_string() -> None:
    (doc,) = recognise_command("gh pr comment 12 --body-file - <<'EOF'\nTests pass.\nReady.\nEOF", "/r")
    assert doc.body == "Tests pass.\nReady.\n" and not doc.problems
    (string,) = recognise_command('gh issue comment 7 --body-file - <<< "Ready for review"', "/r")
    assert string.body == "Ready for review\n" and not string.problems
    (unterminated,) = recognise_command("gh issue comment 7 -F - <<EOF\nno end line", "/r")
    assert unterminated.body == "no end line\n"


def test_here_document_lines_are_never_commands() -> None:
    command = (
        "cat > notes.md <<'EOF'\ngit push origin main\ngh pr create --base main\nEOF\n"
        "gh issue comment 9 --body-file notes.md"
    )
    effects = recognise_command(command, "/nonexistent")
    assert [e.kind for e in effects] == [COMMENT]  # not the push, not the PR written in the file


def test_here_document_markers_inside_quotes_stay_text() -> None:
    (effect,) = recognise_command("gh issue comment 7 --body 'use <<EOF in bash'", "/r")
    assert effect.body == "use <<EOF in bash"
    text, bodies = lift_heredocs("echo \"a <<X\" 'b <<Y' $(cat <<Z)")
    assert bodies == [] and text == "echo \"a <<X\" 'b <<Y' $(cat <<Z)"


def test_a_piped_body_is_refused_with_the_reason() -> None:
    (effect,) = recognise_command('echo "ready" | gh issue comment 7 --body-file -', "/r")
    assert effect.body is None and "pipe" in " ".join(effect.problems)


def _shlex_commands(command: str) -> list[list[str]] | str:
    """What split_commands gave when it was built on shlex (the reference), or shlex's error: the
    same words wherever no quoted or escaped word looks like an operator (or is empty)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|\n()")
    lexer.whitespace, lexer.whitespace_split, lexer.commenters = " \t\r", True, ""
    commands: list[list[str]] = [[]]
    try:
        for token in lexer:
            if set(token) <= set(";&|\n()"):
                commands.append([])
            else:
                commands[-1].append(token)
    except ValueError as exc:
        return str(exc)
    return [words for words in commands if words]


@pytest.mark.parametrize(
    "command",
    [
        'gh pr create --title \'a b\' --body "c \\" \\\\ \\$d" -B main',
        "a&&b||c;d|e&f;;g|&h\ni",
        "(a && b) | (c);(d)e",
        "a\\ b c x''y\"z\"w \\k",
        "echo é\tè\r\x0b ; ls",
        "git push 'unclosed",
        'gh pr create --title "unclosed',
        "trailing \\",
        '"escape at the end \\',
        "",
        " \t ",
    ],
)
def test_words_are_read_as_shlex_reads_them(command: str) -> None:
    try:
        ours: list[list[str]] | str = list(split_commands(command))
    except ValueError as exc:
        ours = str(exc)
    assert ours == _shlex_commands(command)


def test_a_long_title_is_read_in_linear_time() -> None:
    """shlex grew each word a character at a time: 200 KB of title took 1 s, 4 MB minutes."""
    title = "word " * 800_000  # 4 MB
    started = time.monotonic()
    for quoted in (f"'{title}'", f'"{title}"', title.replace(" ", "\\ ")):
        commands = list(split_commands(f"gh pr create --title {quoted} --body b && git push"))
        assert commands == [["gh", "pr", "create", "--title", title, "--body", "b"], ["git", "push"]]
    assert time.monotonic() - started < 20  # a fraction of a second; the quadratic reading: minutes


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("gh pr create --title ';' --head agent/T1", ["--title", ";", "--head", "agent/T1"]),
        ("gh pr create --title '' --head agent/T1", ["--title", "", "--head", "agent/T1"]),
        ('gh pr create --title "&&" --head agent/T1', ["--title", "&&", "--head", "agent/T1"]),
        ("gh pr create --title \\| --head agent/T1", ["--title", "|", "--head", "agent/T1"]),
    ],
)
def test_a_quoted_operator_or_empty_word_does_not_end_the_command(command: str, words: list[str]) -> None:
    # shlex gives such a word as the bare ";" (or ""), which was taken for a separator: the --head after
    # it was lost and the guard keyed the pull request on the current branch instead
    assert list(split_commands(command)) == [["gh", "pr", "create", *words]]
    (effect,) = recognise_command(command, "/r")
    assert effect.kind == PR and effect.head == "agent/T1"


@pytest.mark.parametrize(
    "wrapped",
    [
        "(gh pr create --head h --base b)",
        "(cd /r && gh pr create --head h --base b)",
        "{ gh pr create --head h --base b; }",
        "! gh pr create --head h --base b",
        "if true; then gh pr create --head h --base b; else echo no; fi",
        "while false; do :; done; until true; do gh pr create --head h --base b; done",
        "sh -c 'gh pr create --head h --base b'",
        "bash -o pipefail -ec 'gh pr create --head h --base b | cat'",
        "zsh -c -- 'gh pr create --head h --base b'",
        "command gh pr create --head h --base b",
        "command -p -- gh pr create --head h --base b",
        "exec -a name gh pr create --head h --base b",
        "nohup gh pr create --head h --base b",
        "time -p gh pr create --head h --base b",
        "env -u GH_HOST -i gh pr create --head h --base b",
        "timeout -s KILL 60 gh pr create --head h --base b",
        "/usr/local/bin/gh pr create --head h --base b",
        "./bin/../gh pr create --head h --base b",
        '/bin/sh -c "/usr/bin/gh pr create --head h --base b"',
        "eval 'gh pr create --head h --base b'",
        "eval gh pr create --head h --base b",
        "bash <<'EOF'\ngh pr create --head h --base b\nEOF",
        "bash -s -- arg <<EOF\ngh pr create --head h --base b\nEOF",
        'sh <<< "gh pr create --head h --base b"',
    ],
)
def test_wrapped_commands_are_read_as_the_command_they_run(wrapped: str) -> None:
    (plain,) = recognise_command("gh pr create --head h --base b", "/r")
    (effect,) = recognise_command(wrapped, "/r")
    assert (effect.kind, effect.head, effect.base, effect.cwd) == (PR, "h", "b", "/r")
    assert effect._replace(source="") == plain._replace(source="")


def test_git_s_own_options_before_push() -> None:
    (push,) = recognise_command("git -C sub -c http.extraHeader=x --no-pager push origin feat", "/r")
    assert (push.kind, push.branch, push.remote, push.cwd) == (PUSH, "feat", "origin", "/r/sub")
    assert recognise_command("git -C sub status", "/r") == []


def test_a_wrapper_s_environment_and_directory_reach_the_command() -> None:
    (effect,) = recognise_command("env GH_REPO=o/r gh pr comment 3 --body x", "/r")
    assert (effect.kind, effect.repo, effect.target) == (COMMENT, "o/r", 3)
    (push,) = recognise_command("bash -c 'cd sub && git push origin feat'", "/r")
    assert (push.kind, push.branch, push.cwd) == (PUSH, "feat", "/r/sub")


@pytest.mark.parametrize(
    "command",
    [
        "command -v gh",
        "command -V git",
        "type gh",
        "echo gh pr create",
        "sh -c",
        "sh script.sh gh",
        "time",
        "bash run.sh <<EOF\ngh pr create --head h\nEOF",
    ],
)
def test_what_only_names_gh_runs_nothing(command: str) -> None:
    assert recognise_command(command, "/r") == []


def test_a_command_substitution_is_part_of_its_word() -> None:
    """Unquoted too: the options after it stay the command's (the parenthesis is not an operator)."""
    command = "gh pr create --title $(printf '%s' \"a (b)\") --base develop --head h"
    assert list(split_commands(command)) == [
        ["gh", "pr", "create", "--title", "$(printf '%s' \"a (b)\")", "--base", "develop", "--head", "h"]
    ]
    (effect,) = recognise_command(command, "/r")
    assert (effect.base, effect.head) == ("develop", "h")
    assert list(split_commands("echo $((1 + (2)))x; ls")) == [["echo", "$((1 + (2)))x"], ["ls"]]


def test_the_command_a_substitution_runs_is_read() -> None:
    """URL=$(gh pr create …) runs gh pr create: it was read as an assignment, and nothing was guarded."""
    for command in (
        "PR_URL=$(gh pr create --head h --base b)",
        'echo "opened $(gh pr create --head h --base b)"',
        "echo `gh pr create --head h --base b`",
        "x=$(echo $(gh pr create --head h --base b))",
    ):
        (effect,) = recognise_command(command, "/r")
        assert (effect.kind, effect.head, effect.base, effect.cwd) == (PR, "h", "b", "/r"), command
    (moved,) = recognise_command("cd sub && URL=$(git push origin feat)", "/r")
    assert (moved.kind, moved.branch, moved.cwd) == (PUSH, "feat", "/r/sub")
    # quoted or escaped it is text, and a substituted here-document stays the body (quotes in it too)
    for text in ("echo '$(gh pr create --head h)'", "echo '`gh pr create`'", 'echo "\\$(gh pr create)"'):
        assert recognise_command(text, "/r") == [], text
    (comment,) = recognise_command(
        'gh pr comment 3 --body "$(cat <<\'EOF\'\nIt\'s "done" (see #2)\nEOF\n)"', "/r"
    )
    assert comment.body == 'It\'s "done" (see #2)' and not comment.problems


def test_gh_api_by_url_and_graphql_mutations_that_create() -> None:
    for url in ("https://api.github.com/repos/o/r/pulls", "https://ghe.example/api/v3/repos/o/r/pulls"):
        (effect,) = recognise_command(f"gh api {url} -f head=h -f title=T", "/r")
        assert (effect.kind, effect.repo, effect.head, effect.problems) == (PR, "o/r", "h", ())
    mutation = "gh api graphql -f query='mutation { %s(input: {}) { clientMutationId } }'"
    for name, kind in (("createPullRequest", PR), ("addComment", COMMENT), ("createIssue", ISSUE)):
        (refused,) = recognise_command(mutation % name, "/r")
        assert refused.kind == kind and f"GraphQL {name} mutation" in refused.problems[0]
    assert recognise_command("gh api graphql -f query='query { viewer { login } }'", "/r") == []
    assert recognise_command(mutation % "addLabelsToLabelable", "/r") == []
    (unread,) = recognise_command("gh api graphql -F query=@/nonexistent/q.graphql", "/r")
    assert unread.problems == ("the GraphQL query (pass it with -f query=...)",)


def test_an_unclosed_substitution_or_shells_too_deep_are_refused_with_the_reason() -> None:
    (effect,) = recognise_command("gh pr comment 3 --body $(cat f.md", "/r")
    assert effect.problems == ("the command (it does not parse)",)
    deep = "gh pr create --head h"
    for _ in range(3):
        deep = f"sh -c {shlex.quote(deep)}"
    (three,) = recognise_command(deep, "/r")
    assert three.head == "h" and not three.problems
    (refused,) = recognise_command(f"sh -c {shlex.quote(deep)}", "/r")
    assert refused.problems == ("the command (more than 3 shells deep)",)


@pytest.mark.parametrize(
    "command",
    [
        "gh pr create 2>&1 --head h --base b",
        "gh pr create --head h >&2 --base b",
        "gh pr create &>log --head h --base b",
        "gh pr create --head h 2>&1 --base b | tee log",
        "cd /r && gh pr create --head h --base b 2>&1",
    ],
)
def test_a_redirection_s_ampersand_does_not_end_the_command(command: str) -> None:
    """``2>&1`` was cut at its ``&`` (the background operator): the options after it were lost."""
    (effect,) = recognise_command(command, "/r")
    assert (effect.kind, effect.head, effect.base) == (PR, "h", "b")
    assert list(split_commands("a & b && c |& d")) == [["a"], ["b"], ["c"], ["d"]]


@pytest.mark.parametrize(
    "command",
    [
        "git push --force-with-lease origin feat",
        "git push --force-with-lease=feat origin feat",
        "git push --signed origin feat",
        "git push --signed=if-asked origin feat",
        "git push -o ci.skip origin feat",
    ],
)
def test_git_push_options_whose_value_is_optional_do_not_take_the_next_word(command: str) -> None:
    """``--force-with-lease`` and ``--signed`` take a value only after ``=``: the bare option took the
    remote as its value, so ``git push --force-with-lease origin feat`` was a push of the current
    branch to a remote named ``feat`` (refused: no such remote)."""
    (push,) = recognise_command(command, "/r")
    assert (push.kind, push.branch) == (PUSH, "feat")
    assert push.remote == "origin"


def test_gh_repo_exported_applies_to_later_commands_and_a_prefix_only_to_its_own() -> None:
    """``export GH_REPO=o/r; gh issue comment 6`` comments on o/r: the export was ignored (keyed on
    the hook's repository, so a retry with ``-R o/r`` was a new key); ``GH_REPO=o/r gh …; gh …`` set
    it for the second command too, which the shell does not."""
    (exported,) = recognise_command("export GH_REPO=o/r && gh issue comment 6 --body yo", "/r")
    assert exported.repo == "o/r"
    (exported_env,) = recognise_command("export GH_HOST=h GH_REPO=o/r; gh pr create --head h", "/r")
    assert exported_env.repo == "o/r"
    first, second = recognise_command("GH_REPO=o/r gh issue comment 5 -b a; gh issue comment 6 -b b", "/r")
    assert (first.repo, second.repo) == ("o/r", None)
    first, second = recognise_command("env GH_REPO=o/r gh pr comment 5 -b a && gh pr comment 6 -b b", "/r")
    assert (first.repo, second.repo) == ("o/r", None)
    (inner,) = recognise_command("GH_REPO=o/r bash -c 'gh issue comment 5 -b a'", "/r")
    assert inner.repo == "o/r"


def test_a_tilde_path_is_the_home_directory_as_the_shell_expands_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cd ~/gadgets && gh pr create`` ran in /r/~/gadgets (no such directory): the guard fell back to
    the hook's repository, so the PR (or a comment) was keyed there and a retry from the spelt-out
    path was a new key. The shell expands a leading ``~`` in cd, git -C and --body-file alike."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "note.md").write_text("Tests pass.")
    (pr,) = recognise_command("cd ~/gadgets && gh pr create --head h", "/r")
    assert pr.cwd == str(tmp_path / "gadgets")
    (push,) = recognise_command("git -C ~/gadgets push origin feat", "/r")
    assert push.cwd == str(tmp_path / "gadgets")
    (comment,) = recognise_command("gh pr comment 3 --body-file ~/note.md", "/r")
    assert comment.body == "Tests pass."


def test_gh_api_reads_a_field_from_a_file_or_stdin_as_gh_does(tmp_path: Path) -> None:
    """``gh api …/comments -F body=@note.md`` posts the file's text (``-F`` reads ``@file``, ``@-`` stdin):
    the guard kept the text ``@note.md``, so a reworded retry was not compared with what was posted,
    and after a crash the claim was settled by looking for ``@note.md`` on GitHub: not found, and the
    retry posted a second comment."""
    (tmp_path / "note.md").write_text("Tests pass on build_7.\n")
    path = "repos/o/r/issues/5/comments"
    (comment,) = recognise_command(f"gh api {path} -F body=@note.md", str(tmp_path))
    assert (comment.kind, comment.target, comment.body, comment.problems) == (
        COMMENT,
        5,
        "Tests pass on build_7.\n",
        (),
    )
    (piped,) = recognise_command(f"gh api {path} --field body=@- <<'EOF'\nReady.\nEOF", str(tmp_path))
    assert piped.body == "Ready.\n" and not piped.problems
    (raw,) = recognise_command(f"gh api {path} -f body=@note.md", str(tmp_path))  # -f is raw text
    assert raw.body == "@note.md"
    (issue,) = recognise_command("gh api repos/o/r/issues -F title=@note.md", str(tmp_path))
    assert issue.title == "Tests pass on build_7.\n"
    (unread,) = recognise_command(f"gh api {path} -F body=@missing.md", str(tmp_path))
    assert unread.problems == ("the body field (-F body=@missing.md cannot be read)",)


def test_short_options_are_read_as_gh_reads_them_with_equals_or_in_a_cluster() -> None:
    """gh (pflag) reads ``-H=feat`` as ``feat`` and ``-fH feat`` as ``--fill --head feat``: the guard kept
    ``=feat`` (a head, or with ``-R=o/r`` a repository, no retry spells) and lost the clustered head
    (the current branch instead); ``gh api -X=POST`` was not a POST, so its comment went unguarded."""
    (equals,) = recognise_command("gh pr create -H=feat -R=o/r -B=main", "/r")
    assert (equals.head, equals.repo, equals.base) == ("feat", "o/r", "main")
    (cluster,) = recognise_command("gh pr create -fH feat", "/r")
    assert cluster.head == "feat"
    (attached,) = recognise_command("gh pr create -dfHfeat -t T", "/r")
    assert (attached.head, attached.title) == ("feat", "T")
    assert recognise_command("gh pr create -dw", "/r") == []  # --web in a cluster
    (api,) = recognise_command("gh api -X=POST repos/o/r/issues/5/comments -f body=Ready.", "/r")
    assert (api.kind, api.target, api.body) == (COMMENT, 5, "Ready.")


@pytest.mark.parametrize("number", ["²", "٣", "1²"])
def test_a_number_gh_would_not_read_is_not_a_target(number: str) -> None:
    """``isdigit()`` takes "²" for a digit and ``int()`` does not: the hook failed closed calling it an
    internal error. gh reads ASCII digits only, so such a target is one gitledger cannot tell."""
    [command] = recognise_command(f"gh pr comment {number} --body x", "/tmp", [])
    assert command.target is None and command.problems
    mcp = {"owner": "a", "repo": "b", "issue_number": number, "body": "x"}
    [tool] = recognise("mcp__github__add_issue_comment", mcp, "/tmp", [])
    assert tool.target is None and tool.problems


def test_an_mcp_number_sent_as_an_integral_float_is_that_number() -> None:
    """JSON ``5.0`` is 5 (the MCP proxy keys it so too): the hook refused the call as one whose target
    it could not tell."""
    args = {"owner": "a", "repo": "b", "issue_number": 5.0, "body": "x"}
    [effect] = recognise("mcp__github__add_issue_comment", args, "/tmp", [])
    assert effect.target == 5 and not effect.problems
    [half] = recognise("mcp__github__add_issue_comment", {**args, "issue_number": 5.5}, "/tmp", [])
    assert half.target is None and half.problems


@pytest.mark.parametrize(
    "options",
    [
        "-fbody=Ready.",
        "-Fbody=Ready.",
        "-XPOST -fbody=Ready.",
        "-XPOST -f body=Ready.",
        "-X=POST -fbody=Ready.",
    ],
)
def test_gh_api_short_options_with_their_value_attached_are_read(options: str) -> None:
    """gh (pflag) reads ``-fbody=x`` as ``-f body=x`` and ``-XPOST`` as ``-X POST``: the guard read only
    ``-X=POST``, so ``gh api …/comments -fbody=…`` was a GET and its comment went unguarded."""
    (api,) = recognise_command(f"gh api repos/o/r/issues/5/comments {options}", "/r")
    assert (api.kind, api.repo, api.target, api.body, api.problems) == (COMMENT, "o/r", 5, "Ready.", ())
    (issue,) = recognise_command("gh api repos/o/r/issues -XPOST -ftitle=Flaky", "/r")
    assert (issue.kind, issue.title) == (ISSUE, "Flaky")
    assert recognise_command("gh api repos/o/r/issues/5/comments -fbody=x -XGET", "/r") == []


@pytest.mark.parametrize("repo", ["-R o/r", "--repo o/r", "--repo=o/r", "-Ro/r", "-R=o/r"])
def test_a_repo_given_before_the_pr_or_issue_subcommand_is_read(repo: str) -> None:
    """``--repo`` is a flag of gh's ``pr`` and ``issue`` groups, so ``gh issue -R o/r comment 5`` posts
    as ``gh issue comment 5 -R o/r`` does: the guard did not recognise it, and the comment (the issue,
    the PR) went unguarded."""
    (comment,) = recognise_command(f"gh issue {repo} comment 5 --body Ready.", "/r")
    assert (comment.kind, comment.repo, comment.target, comment.body) == (COMMENT, "o/r", 5, "Ready.")
    (issue,) = recognise_command(f"gh issue {repo} create --title Flaky", "/r")
    assert (issue.kind, issue.repo, issue.title) == (ISSUE, "o/r", "Flaky")
    (pr,) = recognise_command(f"gh pr {repo} new --head feat", "/r")
    assert (pr.kind, pr.repo, pr.head) == (PR, "o/r", "feat")
