"""The Python API: keys from call arguments, replay, mismatch, async, failures and SIGKILL at each point.

In-process behaviour runs against the in-memory store (milliseconds); everything that involves
processes (replay across processes, crashes, races, leaked readers) runs against real repositories.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gitledger
from gitledger import checks
from gitledger.api import (
    Ledger,
    ResultNotRecordableError,
    StepInProgressError,
    StepNotFinishedError,
    StepUnconfirmedError,
    key_of,
)
from gitledger.core.errors import CheckError, UsageError
from gitledger.core.events import ATTEMPTING
from gitledger.core.keys import StepKey, canonical_json
from gitledger.core.owner import Owner
from gitledger.core.protocol import PayloadMismatchError, iso
from gitledger.core.store import Intent, MemoryStore
from testing.repos import run_json


@pytest.fixture
def ledger() -> Ledger:
    return Ledger(MemoryStore())


class Calls:
    """Counts real calls of a guarded function."""

    def __init__(self) -> None:
        self.n = 0

    def hit(self) -> int:
        self.n += 1
        return self.n


def state(ledger: Ledger, key: StepKey | str) -> str:
    return ledger.store.load(key.key if isinstance(key, StepKey) else key).folded.state


def claim_elsewhere(ledger: Ledger, step_key: StepKey, lease_until: float | None) -> None:
    """A claim by a live-looking owner on another host."""
    owner = Owner("elsewhere", "b", 1, "1", "s").to_json()
    event: dict[str, Any] = {"state": ATTEMPTING, "key": step_key.key, "owner": owner, "at": iso(0)}
    if lease_until is not None:
        event["lease_until"] = iso(lease_until)
    ledger.store.append(Intent.of(step_key), event, None)


def dead_claim(ledger: Ledger, step_key: StepKey) -> None:
    """A claim by a process of this host that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    here = Owner.current()
    owner = Owner(here.host, here.boot, proc.pid, "0", "dead").to_json()
    event = {"state": ATTEMPTING, "key": step_key.key, "owner": owner, "lease_until": iso(2e9)}
    ledger.store.append(Intent.of(step_key), event, None)


# -- keys ---------------------------------------------------------------------------------------------


def test_key_ignores_argument_style_and_dict_order(ledger: Ledger) -> None:
    @ledger.idempotent(step="notify")
    def notify(task_id: str, channel: str, payload: dict[str, Any], urgent: bool = False) -> None: ...

    base = key_of(notify, "T-9", "ops", {"x": 1, "y": [1, {"b": 2, "a": 1}]})
    same = [
        key_of(notify, "T-9", channel="ops", payload={"y": [1, {"a": 1, "b": 2}], "x": 1}),
        key_of(notify, payload={"x": 1, "y": [1, {"b": 2, "a": 1}]}, channel="ops", task_id="T-9"),
        key_of(notify, "T-9", "ops", {"x": 1, "y": [1, {"b": 2, "a": 1}]}, False),  # default given
        key_of(notify, "T-9", "ops", {"x": 1, "y": (1, {"b": 2, "a": 1})}),  # tuple = list in JSON
    ]
    assert {k.key for k in same} == {base.key}
    different = [
        key_of(notify, "T-9", "ops", {"x": 2, "y": [1, {"b": 2, "a": 1}]}),
        key_of(notify, "T-9", "dev", {"x": 1, "y": [1, {"b": 2, "a": 1}]}),
        key_of(notify, "T-9", "ops", {"x": 1, "y": [{"b": 2, "a": 1}, 1]}),  # list order counts
        key_of(notify, "T-9", "ops", {"x": 1, "y": [1, {"b": 2, "a": 1}]}, urgent=True),
        key_of(notify, "T-10", "ops", {"x": 1, "y": [1, {"b": 2, "a": 1}]}),
    ]
    assert len({k.key for k in different} | {base.key}) == 6
    assert base.task == "T-9" and base.step == "notify" and base.key.startswith("t-9.notify.")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


def reordered(value: Any) -> Any:
    """The same JSON value with every dict's insertion order reversed."""
    if isinstance(value, dict):
        return {k: reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(v) for v in value]
    return value


@settings(max_examples=150, deadline=None)
@given(payload=JSON, other=JSON)
def test_key_is_a_function_of_the_json_value_only(payload: Any, other: Any) -> None:
    ledger = Ledger(MemoryStore())

    @ledger.idempotent(step="s")
    def f(task_id: str, payload: Any, other: Any = None) -> None: ...

    key = key_of(f, "T", payload, other)
    assert key_of(f, "T", other=reordered(other), payload=reordered(payload)) == key
    assert (key_of(f, "T", other, payload) == key) == (canonical_json(payload) == canonical_json(other))


def test_key_comes_from_task_step_and_arguments_not_from_code(ledger: Ledger) -> None:
    """Renaming or moving a function keeps its keys (a trap of SDK-generated keys)."""

    @ledger.idempotent(step="notify")
    def notify(task_id: str, channel: str) -> None: ...

    @ledger.idempotent(step="notify")
    def send_notification_v2(task_id: str, channel: str) -> None: ...

    expected = ledger.key("T-1", "notify", args={"channel": "ops"})
    assert key_of(notify, "T-1", "ops") == key_of(send_notification_v2, "T-1", "ops") == expected


def test_include_and_exclude_choose_the_arguments_that_count(ledger: Ledger) -> None:
    @ledger.idempotent(step="s", exclude=["attempt", "client"])
    def ex(task_id: str, to: str, attempt: int, client: object) -> None: ...

    @ledger.idempotent(step="s", include=["to"])
    def inc(task_id: str, to: str, attempt: int, client: object) -> None: ...

    k1 = key_of(ex, "T", "a@b", 1, object())
    assert key_of(ex, "T", "a@b", 2, object()) == k1
    assert key_of(ex, "T", "c@d", 1, object()) != k1
    assert key_of(inc, "T", "a@b", 7, threading.Lock()) == k1


def test_task_from_decorator(ledger: Ledger) -> None:
    @ledger.idempotent(step="deploy", task="release-7")
    def deploy(env: str) -> None: ...

    assert key_of(deploy, "prod") == ledger.key("release-7", "deploy", args={"env": "prod"})


def test_uncanonical_argument_is_a_usage_error_naming_it(ledger: Ledger) -> None:
    calls = Calls()

    @ledger.idempotent(step="s")
    def f(task_id: str, payload: dict[str, Any], client: object = None) -> int:
        return calls.hit()

    with pytest.raises(UsageError, match=r"f\(\): argument client of type object .*exclude=\['client'\]"):
        f("T", {}, object())
    with pytest.raises(UsageError, match=r"argument payload\.when of type datetime"):
        import datetime

        f("T", {"when": datetime.datetime.now()})
    with pytest.raises(UsageError, match=r"argument payload\.x .*NaN"):
        f("T", {"x": float("nan")})
    with pytest.raises(UsageError, match="non-string key 1"):
        f("T", {1: "a"})  # type: ignore[dict-item]
    with pytest.raises(UsageError, match="task_id must be a str"):
        f(42, {})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        f("T")  # type: ignore[call-arg]  # wrong arguments fail like the plain function
    assert calls.n == 0 and not list(ledger.store.entries())


def test_decoration_errors_are_found_at_once(ledger: Ledger) -> None:
    def no_task(channel: str) -> None: ...

    def f(task_id: str, a: int) -> None: ...

    with pytest.raises(UsageError, match="no 'task_id' argument"):
        ledger.idempotent(step="s")(no_task)
    with pytest.raises(UsageError, match="not both"):
        ledger.idempotent(step="s", include=["a"], exclude=["a"])(f)
    with pytest.raises(UsageError, match=r"no argument named 'b'.*task_id, a"):
        ledger.idempotent(step="s", exclude=["b"])(f)
    with pytest.raises(UsageError, match="list of argument names"):
        ledger.idempotent(step="s", exclude="a")(f)
    with pytest.raises(UsageError, match="step must not be empty"):
        ledger.idempotent(step=" ")(f)


# -- replay, mismatch, failures -------------------------------------------------------------------------


def test_result_is_recorded_and_replayed(ledger: Ledger) -> None:
    calls = Calls()

    @ledger.idempotent(step="notify")
    def notify(task_id: str, channel: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"n": calls.hit(), "channel": channel, "ids": (1, 2)}

    first = notify("T-9", "ops", {"x": 1})
    again = notify("T-9", "ops", {"x": 1})
    assert first == {"n": 1, "channel": "ops", "ids": (1, 2)}
    assert again == {"n": 1, "channel": "ops", "ids": [1, 2]}  # replayed as JSON
    assert notify("T-9", "ops", {"x": 2})["n"] == 2
    assert calls.n == 2


def test_explicit_key_reused_with_other_arguments_raises(ledger: Ledger) -> None:
    calls = Calls()

    @ledger.idempotent(step="charge", key=lambda task_id, order, amount: f"order-{order}")
    def charge(task_id: str, order: int, amount: int) -> int:
        return calls.hit()

    assert charge("T", 7, 100) == 1
    assert charge("T", 7, 100) == 1  # same key, same payload: replay
    with pytest.raises(PayloadMismatchError, match="different arguments"):
        charge("T", 7, 250)
    assert charge("T", 8, 250) == 2
    assert calls.n == 2
    assert key_of(charge, "T", 7, 1) == key_of(charge, "T", 7, 2)  # the key is the caller's

    @ledger.idempotent(step="charge", key="fixed")
    def fixed(task_id: str, amount: int) -> int:
        return calls.hit()

    fixed("T", 1)
    with pytest.raises(PayloadMismatchError):
        fixed("T", 2)


def test_explicit_key_in_a_with_block(ledger: Ledger) -> None:
    with ledger.step("T", "mail", key="welcome-42", args={"to": "a@b"}) as s:
        s.done(ref="msg-1")
    with ledger.step("T", "mail", key="welcome-42", args={"to": "a@b"}) as s:
        assert (s.status, s.ref) == ("skipped", "msg-1")
    with pytest.raises(PayloadMismatchError), ledger.step("T", "mail", key="welcome-42", args={"to": "c@d"}):
        pytest.fail("must not enter")


def test_failure_is_recorded_and_retried(ledger: Ledger) -> None:
    attempts = Calls()

    @ledger.idempotent(step="flaky")
    def flaky(task_id: str) -> str:
        if attempts.hit() == 1:
            raise ConnectionError("network down")
        return "ok"

    with pytest.raises(ConnectionError):
        flaky("T")
    step_key = key_of(flaky, "T")
    assert state(ledger, step_key) == "failed"
    failed = [e for e in ledger.store.load(step_key.key).events if e["state"] == "failed"]
    assert "ConnectionError: network down" in failed[0]["message"]
    assert flaky("T") == "ok"
    assert flaky("T") == "ok" and attempts.n == 2


@pytest.mark.parametrize(
    ("value", "problem"),
    [({1, 2}, "is a set"), ({"k": object()}, "is a object"), ("x" * 70_000, "more than the 65536")],
)
def test_unrecordable_result_records_done_then_raises(ledger: Ledger, value: Any, problem: str) -> None:
    """The effect already happened: record it (so it is never repeated), then tell the caller."""
    calls = Calls()

    @ledger.idempotent(step="s")
    def f(task_id: str) -> Any:
        calls.hit()
        return value

    with pytest.raises(ResultNotRecordableError, match=problem) as info:
        f("T")
    assert info.value.value is value
    assert state(ledger, key_of(f, "T")) == "done"
    assert f("T") is None and calls.n == 1


def test_ref_and_from_ref(ledger: Ledger) -> None:
    """ref= picks the recorded ref; from_ref= rebuilds the value when a check found the effect."""
    existing: dict[str, str] = {}
    calls = Calls()

    def find(step: StepKey) -> str | None:
        return existing.get(step.key)

    @ledger.idempotent(
        step="open-pr", checks=[find], ref=lambda pr: pr["url"], from_ref=lambda url: {"url": url, "found": 1}
    )
    def open_pr(task_id: str, title: str) -> dict[str, Any]:
        calls.hit()
        return {"url": f"https://example/{title}"}

    assert open_pr("T", "a") == {"url": "https://example/a"}
    assert ledger.store.load(key_of(open_pr, "T", "a").key).folded.ref == "https://example/a"
    existing[key_of(open_pr, "T", "b").key] = "https://example/pr/9"  # made by a run that crashed
    assert open_pr("T", "b") == {"url": "https://example/pr/9", "found": 1}
    assert calls.n == 1


def test_checks_may_depend_on_the_arguments(ledger: Ledger, tmp_path: Path) -> None:
    seen: list[int] = []

    def comment_check(number: int) -> Any:
        def find(step: StepKey) -> str | None:
            seen.append(number)
            return None

        return find

    @ledger.idempotent(step="comment", checks=lambda task_id, number, text: [comment_check(number)])
    def comment(task_id: str, number: int, text: str) -> None: ...

    comment("T", 12, "hello")
    assert seen == [12]


def test_custom_check_errors_mean_unknown_not_absent(ledger: Ledger) -> None:
    calls = Calls()

    def broken(step: StepKey) -> str | None:
        raise TimeoutError("API timed out")

    def wrong(step: StepKey) -> str | None:
        return True  # type: ignore[return-value]

    for check, message in ((broken, "TimeoutError: API timed out"), (wrong, "returned a bool")):

        @ledger.idempotent(step="s", checks=[check])
        def f(task_id: str) -> None:
            calls.hit()

        with pytest.raises(CheckError, match=message):
            f("T")
    assert calls.n == 0


def test_in_progress_and_unconfirmed_are_errors_not_results(ledger: Ledger) -> None:
    calls = Calls()

    def make(policy: str | None = None) -> Any:
        @ledger.idempotent(step="s", on_unconfirmed=policy)
        def f(task_id: str) -> int:
            return calls.hit()

        return f

    f = make()
    claim_elsewhere(ledger, key_of(f, "busy"), lease_until=2e9)
    with pytest.raises(StepInProgressError, match="in progress") as busy:
        f("busy")
    assert busy.value.exit_code == 75 and busy.value.result.status == "in_progress"
    dead_claim(ledger, key_of(f, "crashed"))
    with pytest.raises(StepUnconfirmedError, match="gitledger resolve") as unknown:
        f("crashed")
    assert unknown.value.exit_code == 3
    assert make("skip")("crashed") is None and calls.n == 0  # at most once: assumed done
    dead_claim(ledger, key_of(f, "crashed-2"))
    assert make("retry")("crashed-2") == 1  # at least once: runs again


def test_config_defaults_apply(tmp_path: Path, repo: Path) -> None:
    (repo / ".gitledger.yml").write_text(
        "steps:\n  notify:\n    checks: ['file:sent/{key}']\n    on_unconfirmed: retry\n"
    )
    with Ledger.open(repo) as ledger:
        [check] = ledger.checks("notify")
        assert check.spec == "file:sent/{key}"
        assert ledger._policy("notify", None, None).on_unconfirmed == "retry"
        assert ledger._policy("notify", "skip", 5).on_unconfirmed == "skip"


# -- the with block ---------------------------------------------------------------------------------


def test_with_block_runs_once_and_replays(ledger: Ledger) -> None:
    with ledger.step("T-1", "push", content="v1") as s:
        assert s.should_run and s.status == "running"
        assert s.env["GITLEDGER_KEY"] == s.key and s.env["GITLEDGER_BRANCH"] == s.step_key.branch
        s.done(ref="abc123", result={"files": 3})
    assert (s.status, s.ref, s.result) == ("created", "abc123", {"files": 3})
    with ledger.step("T-1", "push", content="v1") as again:
        assert not again.should_run
        assert (again.status, again.ref, again.result) == ("skipped", "abc123", {"files": 3})
        with pytest.raises(UsageError, match="call it only when should_run"):
            again.done()
    with ledger.step("T-1", "push", content="v2") as other:
        assert other.should_run
        other.done()


def test_with_block_exception_records_failed_and_is_retried(ledger: Ledger) -> None:
    with pytest.raises(RuntimeError, match="boom"), ledger.step("T", "s") as s:
        raise RuntimeError("boom")
    assert s.status == "failed" and state(ledger, s.key) == "failed"
    with ledger.step("T", "s") as retry:
        assert retry.should_run
        retry.done(ref="second")
    assert state(ledger, retry.key) == "done"


def test_with_block_done_then_exception_keeps_done(ledger: Ledger) -> None:
    with pytest.raises(ValueError), ledger.step("T", "s") as s:
        s.done(ref="made")
        raise ValueError("after the effect")
    assert s.status == "created" and state(ledger, s.key) == "done"


def test_with_block_without_done_is_an_error_and_stays_claimed(ledger: Ledger) -> None:
    with pytest.raises(StepNotFinishedError, match=r"without s\.done"), ledger.step("T", "s") as s:
        pass
    assert state(ledger, s.key) == "attempting"  # unknown, exactly like a crash after the effect
    with pytest.raises(StepInProgressError), ledger.step("T", "s"):
        pytest.fail("must not enter")


def test_with_block_misuse(ledger: Ledger) -> None:
    with pytest.raises(UsageError, match="not both"):
        ledger.step("T", "s", content="a", args={"a": 1})
    with pytest.raises(UsageError, match="list of checks"):
        ledger.step("T", "s", checks=checks.branch())  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="needs a git repository"):
        ledger.step("T", "s", checks=[checks.branch()])
    with pytest.raises(UsageError, match="unknown check spec"):
        checks.branch("not a remote")
    with pytest.raises(UsageError, match="positive"):
        checks.github_comment(0)
    with pytest.raises(UsageError, match="twice"), ledger.step("T", "twice") as s:
        s.done()
        s.done()
    assert state(ledger, s.key) == "done"


def test_done_after_the_block_is_an_error(ledger: Ledger) -> None:
    with pytest.raises(OSError), ledger.step("T", "late") as s:
        raise OSError("the effect failed")
    with pytest.raises(UsageError, match="after the block"):
        s.done()
    assert state(ledger, s.key) == "failed"


def test_a_cyclic_result_is_unrecordable_not_a_failure(ledger: Ledger) -> None:
    calls = Calls()

    @ledger.idempotent(step="s")
    def f(task_id: str) -> Any:
        calls.hit()
        cycle: list[Any] = []
        cycle.append(cycle)
        return cycle

    with pytest.raises(ResultNotRecordableError, match="RecursionError"):
        f("T")
    assert state(ledger, key_of(f, "T")) == "done" and f("T") is None and calls.n == 1


def test_unrecordable_result_in_a_with_block(ledger: Ledger) -> None:
    with pytest.raises(ResultNotRecordableError, match="is a bytes"), ledger.step("T", "s") as s:
        s.done(ref="r", result=b"raw")
    assert state(ledger, s.key) == "done"
    with ledger.step("T", "s") as again:
        assert (again.status, again.ref, again.result) == ("skipped", "r", None)


def test_file_and_command_checks_need_no_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    local = Ledger(MemoryStore())
    (tmp_path / "sent").mkdir()
    key = local.key("T", "s")
    (tmp_path / "sent" / key.key).write_text("x")
    with local.step("T", "s", checks=[checks.file("sent/{key}")]) as s:
        assert s.status == "already_existed" and s.ref == str(tmp_path / "sent" / key.key)
    with local.step("T", "t", checks=[checks.command("echo found-it")]) as t:
        assert (t.status, t.ref) == ("already_existed", "found-it")


# -- async ------------------------------------------------------------------------------------------


def test_async_function_and_async_with(ledger: Ledger) -> None:
    calls = Calls()

    @ledger.idempotent(step="notify")
    async def notify(task_id: str, text: str) -> dict[str, int]:
        await asyncio.sleep(0)
        return {"n": calls.hit()}

    @ledger.idempotent(step="fails")
    async def fails(task_id: str) -> None:
        raise OSError("down")

    async def main() -> None:
        assert await notify("T", "hi") == {"n": 1}
        assert await notify("T", "hi") == {"n": 1}
        with pytest.raises(OSError):
            await fails("T")
        assert state(ledger, key_of(fails, "T")) == "failed"
        async with ledger.step("T", "async-with") as s:
            assert s.should_run
            await asyncio.sleep(0)
            s.done(result=[1])
        async with ledger.step("T", "async-with") as s2:
            assert (s2.status, s2.result) == ("skipped", [1])

    asyncio.run(main())
    assert calls.n == 1


def test_async_calls_share_one_git_ledger_concurrently(repo: Path) -> None:
    """Concurrent tasks do their ledger I/O in threads; the store serialises the git reader."""
    calls = Calls()
    with Ledger.open(repo) as ledger:

        @ledger.idempotent(step="notify")
        async def notify(task_id: str, n: int) -> int:
            await asyncio.sleep(0.01)
            calls.hit()
            return n * 10

        async def main() -> list[Any]:
            first = await asyncio.gather(*(notify(f"T-{i}", i) for i in range(12)))
            same = await asyncio.gather(*(notify("T-same", 1) for _ in range(4)), return_exceptions=True)
            return [first, same]

        first, same = asyncio.run(main())
        assert first == [i * 10 for i in range(12)]
        assert all(r == 10 or isinstance(r, StepInProgressError) for r in same), same
        assert calls.n == 13
    listed = run_json("list", cwd=repo)
    assert len(listed) == 13 and all(e["state"] == "done" for e in listed)


# -- processes --------------------------------------------------------------------------------------

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import gitledger
    from gitledger import checks

    check, policy = sys.argv[1], sys.argv[2]
    CHECKS = {
        "file": [checks.file("sent/{key}")],
        "cmd": [checks.command('test -f outbox.txt && grep -qF "$GITLEDGER_KEY" outbox.txt')],
        "ledger": [checks.ledger()],
    }
    with gitledger.Ledger.open(".") as ledger:

        @ledger.idempotent(step="notify", checks=CHECKS[check], on_unconfirmed=policy)
        def notify(task_id, channel, payload):
            key = gitledger.key_of(notify, task_id, channel, payload).key
            with open("outbox.txt", "a") as fh:
                fh.write(f"{key} {channel} {json.dumps(payload, sort_keys=True)}\\n")
            os.makedirs("sent", exist_ok=True)
            open(os.path.join("sent", key), "w").close()
            return {"channel": channel, "pid": os.getpid()}

        try:
            value = notify("T-9", "ops", {"x": 1, "y": [2, 3]})
        except gitledger.GitledgerError as exc:
            print(str(exc), file=sys.stderr)
            sys.exit(exc.exit_code)
        key = gitledger.key_of(notify, "T-9", "ops", {"y": [2, 3], "x": 1}).key
        print(json.dumps({"value": value, "key": key}))
    """
)


def run_script(
    repo: Path, check: str = "ledger", policy: str = "fail", fault: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("GITLEDGER_FAULT", None)
    if fault:
        env["GITLEDGER_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, check, policy],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def outbox(repo: Path) -> list[str]:
    path = repo / "outbox.txt"
    return path.read_text().splitlines() if path.exists() else []


def entry(repo: Path) -> dict[str, Any]:
    [found] = run_json("list", cwd=repo)
    return dict(found)


def test_replay_across_processes(repo: Path) -> None:
    first = run_script(repo)
    assert first.returncode == 0, first.stderr
    second = run_script(repo)
    assert second.returncode == 0, second.stderr
    one, two = json.loads(first.stdout), json.loads(second.stdout)
    assert two["value"] == one["value"]  # the first process's pid: the recorded result, not a call
    assert len(outbox(repo)) == 1 and one["key"] == two["key"]
    assert entry(repo)["state"] == "done"


@pytest.mark.parametrize("check", ["file", "cmd"])
@pytest.mark.parametrize("fault", ["before-claim", "after-claim", "after-effect", "during-done"])
def test_sigkill_at_each_point_never_duplicates_a_queryable_effect(
    repo: Path, check: str, fault: str
) -> None:
    crashed = run_script(repo, check, fault=fault)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    effect_made = fault in ("after-effect", "during-done")
    assert len(outbox(repo)) == int(effect_made)
    rerun = run_script(repo, check)
    assert rerun.returncode == 0, rerun.stderr
    assert len(outbox(repo)) == 1
    listed = entry(repo)
    assert listed["state"] == "done" and not listed["duplicate"]
    assert listed["outcome"] == ("already_existed" if effect_made else "created")
    if not effect_made:
        assert json.loads(rerun.stdout)["value"]["channel"] == "ops"
    final = run_script(repo, check)
    assert final.returncode == 0 and len(outbox(repo)) == 1


@pytest.mark.parametrize(
    ("fault", "policy", "rc", "effects"),
    [
        ("before-claim", "fail", 0, 1),  # nothing was claimed: it simply runs
        ("after-claim", "fail", 3, 0),  # claimed, nothing can tell: stop and ask
        ("after-claim", "skip", 0, 0),  # at most once (here: lost, and recorded as assumed)
        ("after-claim", "retry", 0, 1),
        ("after-effect", "fail", 3, 1),
        ("after-effect", "skip", 0, 1),  # at most once
        ("after-effect", "retry", 0, 2),  # at least once: the documented duplicate
        ("during-done", "fail", 3, 1),
    ],
)
def test_sigkill_with_a_ledger_only_check_follows_the_policy(
    repo: Path, fault: str, policy: str, rc: int, effects: int
) -> None:
    crashed = run_script(repo, "ledger", policy, fault=fault)
    assert crashed.returncode == -signal.SIGKILL
    rerun = run_script(repo, "ledger", policy)
    assert rerun.returncode == rc, rerun.stderr
    assert len(outbox(repo)) == effects
    if rc == 3:
        assert "gitledger resolve" in rerun.stderr
        assert entry(repo)["state"] == "attempting"
    else:
        assert entry(repo)["state"] == "done"
        again = run_script(repo, "ledger", policy)
        assert again.returncode == 0 and len(outbox(repo)) == effects


def test_processes_racing_on_one_call_run_it_once(repo: Path) -> None:
    go = repo.parent / "go"
    racer = textwrap.dedent(
        f"""
        import os, time, gitledger
        while not os.path.exists({str(go)!r}):
            time.sleep(0.005)
        with gitledger.Ledger.open(".") as ledger:
            @ledger.idempotent(step="notify")
            def notify(task_id, channel):
                with open("outbox.txt", "a") as fh:
                    fh.write(channel + "\\n")
                time.sleep(0.3)
                return os.getpid()
            try:
                print(notify("T-race", "ops"))
            except gitledger.StepInProgressError:
                print("in_progress")
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", racer], cwd=repo, stdout=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    go.write_text("go")
    outputs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(outbox(repo)) == 1, outputs
    pids = {o for o in outputs if o != "in_progress"}
    assert len(pids) == 1, outputs  # whoever did not act got the winner's recorded result


# -- resources and imports --------------------------------------------------------------------------


def child_processes() -> list[str]:
    me = str(os.getpid())
    found = []
    for entry_ in Path("/proc").iterdir():
        if not entry_.name.isdigit():
            continue
        try:
            stat = (entry_ / "stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2 :].split()
        if rest[1] == me and rest[0] not in ("Z", "X"):
            found.append(stat[stat.find("(") + 1 : stat.rfind(")")])
    return found


def test_open_and_close_leak_no_git_processes(repo: Path) -> None:
    assert "git" not in child_processes()
    fds_before = len(os.listdir("/proc/self/fd"))
    for i in range(15):
        with Ledger.open(repo) as ledger:
            with ledger.step("T", f"s{i}") as s:
                s.done()
            assert "git" in child_processes()  # the one persistent cat-file reader
        assert ledger.closed
    assert "git" not in child_processes()
    assert len(os.listdir("/proc/self/fd")) <= fds_before + 2
    with pytest.raises(UsageError, match="closed"), ledger.step("T", "after"):
        pass
    assert "git" not in child_processes()


def test_a_dropped_ledger_stops_its_git_reader(repo: Path) -> None:
    import gc

    ledger = Ledger.open(repo)
    with ledger.step("T", "s") as s:
        s.done()
    assert "git" in child_processes()
    del ledger, s
    gc.collect()
    assert "git" not in child_processes()


def test_a_ledger_belongs_to_its_process(ledger: Ledger) -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            with ledger.step("T", "child"):
                pass
            os.write(write, b"no error")
        except UsageError as exc:
            os.write(write, str(exc).encode()[:500])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    os.close(write)
    message = os.read(read, 1000).decode()
    os.close(read)
    assert "open a new Ledger in each process" in message


def test_import_gitledger_is_cheap() -> None:
    code = textwrap.dedent(
        """
        import sys, gitledger
        assert not {"typer", "github", "yaml", "gitledger.api"} & set(sys.modules), sorted(sys.modules)
        gitledger.Ledger, gitledger.checks.branch("origin"), gitledger.PayloadMismatchError
        with gitledger.Ledger(gitledger.MemoryStore()) as ledger:
            with ledger.step("T", "s") as s:
                s.done()
        bad = {"typer", "github", "yaml"} & set(sys.modules)
        assert not bad, bad
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert set(gitledger.__all__) <= set(dir(gitledger))
    for name in gitledger.__all__:
        assert getattr(gitledger, name) is not None
    with pytest.raises(AttributeError):
        _ = gitledger.nothing_here


def test_git_ledger_open_uses_no_yaml_without_a_config(repo: Path) -> None:
    code = (
        "import sys, gitledger\n"
        "with gitledger.Ledger.open('.') as l:\n"
        "    with l.step('T', 's', checks=[gitledger.checks.branch()]) as s: s.done()\n"
        "bad = {'typer', 'github', 'yaml'} & set(sys.modules)\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=repo)


USER_PROGRAM = textwrap.dedent(
    """
    import asyncio
    import gitledger
    from gitledger import checks

    ledger = gitledger.Ledger(gitledger.MemoryStore())

    @ledger.idempotent(step="notify", checks=[checks.ledger()])
    def notify(task_id: str, channel: str, payload: dict[str, int]) -> dict[str, str]:
        return {"sent": channel}

    @ledger.idempotent(step="count")
    async def count(task_id: str, n: int) -> int:
        return n

    reveal_type(notify)
    reveal_type(count)
    sent: dict[str, str] = notify("T-9", "ops", {"x": 1})
    n: int = asyncio.run(count("T", 1))
    key: gitledger.StepKey = gitledger.key_of(notify, "T-9", "ops", {"x": 1})
    with ledger.step("T", "s", checks=[checks.branch("origin"), lambda k: None]) as s:
        if s.should_run:
            s.done(ref="x")
    notify("T-9", 3, {"x": 1})  # E1
    gitledger.key_of(notify, "T-9")  # E2
    wrong: int = notify("T", "ops", {})  # E3
    """
)


def test_decorated_functions_keep_their_signatures_for_type_checkers(tmp_path: Path) -> None:
    """A user's mypy --strict sees the decorated signatures (ParamSpec) and this package's types."""
    program = tmp_path / "user.py"
    program.write_text(USER_PROGRAM)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "c"),
            "user.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = proc.stdout.splitlines()
    lines_of = {n + 1: line for n, line in enumerate(USER_PROGRAM.splitlines())}
    errors = {lines_of[int(line.split(":")[1])].split("# ")[-1] for line in lines if ": error:" in line}
    assert errors == {"E1", "E2", "E3"}, proc.stdout
    revealed = [
        line.split("Revealed type is ")[1].replace("builtins.", "")
        for line in lines
        if "Revealed type" in line
    ]
    assert revealed == [
        '"def (task_id: str, channel: str, payload: dict[str, int]) -> dict[str, str]"',
        '"def (task_id: str, n: int) -> typing.Coroutine[Any, Any, int]"',
    ], proc.stdout


def test_github_checks_bind_to_the_ledgers_github_settings(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """checks.github_pr()/github_comment(N)/github_branch() find what a crashed run made on GitHub."""
    import urllib.request

    from testing import fakegithub as fake
    from testing.repos import git

    server = fake.FakeGitHub(tokens=["t"])
    bare = server.add_repo("acme/widgets")
    server.start()

    def post(path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            f"{server.url}/repos/acme/widgets{path}",
            data=json.dumps(body).encode(),
            headers={"Authorization": "Bearer t", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    try:
        monkeypatch.setenv("GITHUB_TOKEN", "t")
        monkeypatch.setenv("GITHUB_API_URL", server.url)
        git("remote", "add", "origin", str(bare), cwd=repo)
        git("push", "-q", "origin", "main", cwd=repo)
        with Ledger.open(repo, github_repo="acme/widgets") as ledger:
            pr = ledger.key("T-1", "open-pr")
            # a previous run pushed, opened the PR and commented, then died before recording anything
            git("commit", "-q", "--allow-empty", "-m", "work", cwd=repo)
            git("push", "-q", "origin", f"HEAD:refs/heads/{pr.branch}", cwd=repo)
            made = post("/pulls", {"title": "t", "head": pr.branch, "base": "main", "body": pr.marker})

            @ledger.idempotent(step="comment", checks=lambda task_id, number: [checks.github_comment(number)])
            def comment(task_id: str, number: int) -> None:
                pytest.fail("the comment exists")

            post(
                f"/issues/{made['number']}/comments", {"body": key_of(comment, "T-1", made["number"]).marker}
            )

            with ledger.step("T-1", "open-pr", checks=[checks.github_pr()]) as s:
                assert (s.status, s.ref) == ("already_existed", made["html_url"])
            assert comment("T-1", made["number"]) is None
            assert state(ledger, key_of(comment, "T-1", made["number"])) == "done"
            with ledger.step("T-1", "push", checks=[checks.github_branch()]) as push:
                assert push.should_run  # the push step's own branch does not exist
                push.done()
            assert ledger.github().full_name == "acme/widgets"  # the client the checks used
        with pytest.raises(UsageError, match="closed"):
            ledger.github()
    finally:
        server.stop()
