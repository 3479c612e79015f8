"""How the agent guard reads shell commands: lines, here-documents and the bodies agents write."""

from __future__ import annotations

from gitledger.core.effects import COMMENT, PR, PUSH
from gitledger.features.agent.recognise import recognise_command
from gitledger.features.agent.shell import lift_heredocs


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
