"""The storage engine's peers as optional baselines (issue 14), each used the way its users use it.

- ``dbos-sqlite``: DBOS Transact's durable workflows on its SQLite system database. A step is a
  workflow run under a workflow id (``SetWorkflowID``): *fresh* = a new id (DBOS records the run and
  its result), *done* = an id that already ran (DBOS returns the recorded result without running it).
  The database file is put in WAL mode before DBOS opens it (the mode is kept in the file); DBOS
  leaves SQLite's ``synchronous`` at its default, FULL: every commit is synced, as gitledger's
  ``durability: fsync``.
- ``powertools-redis``: AWS Lambda Powertools' ``idempotent_function`` on its Redis persistence layer.
  *fresh* = a new idempotency key (an in-progress record, the function, the completed record), *done*
  = a completed key (its stored result). Redis with its defaults: nothing is synced per write (RDB
  snapshots): compare it with ``durability: none``.
- ``powertools-redis-aof``: the same with Redis's append-only file synced at every write
  (``appendonly yes``, ``appendfsync always``): durable per step.

Each runs when it is installed; nothing here is a dependency of gitledger::

    pip install dbos aws-lambda-powertools redis boto3   # boto3: Powertools' idempotency imports it
    apt install redis-server                             # (Debian) a redis-server on PATH

Every process is local: Redis listens on 127.0.0.1 (a server per measurement, started here), DBOS's
database is a file; DBOS is configured without its admin server, telemetry or Conductor.

What a peer measures differs from a :class:`~gitledger.core.store.Store` in one way: the peers run
their own protocol, not gitledger's ``StepRunner`` (that is what a user of them gets). Their ledgers
hold 100 entries (built by the peer itself in each measuring process): building 100 000 DBOS
workflows takes ~5 minutes. DBOS is not measured with concurrent writers: each process that
launches DBOS on one database recovers the workflows it finds pending, which are the other writers'
workflows in flight.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PEERS = ("dbos-sqlite", "powertools-redis", "powertools-redis-aof")
WRITER_PEERS = ("powertools-redis", "powertools-redis-aof")  # DBOS: see the module's doc
PEER_SIZE = 100  # entries in a peer's ledger


def available() -> list[str]:
    """The peers that can run here: their packages importable (and ``redis-server`` on PATH)."""
    found = []
    if importlib.util.find_spec("dbos") is not None:
        found.append("dbos-sqlite")
    modules = ("aws_lambda_powertools", "redis", "boto3")
    if all(importlib.util.find_spec(m) is not None for m in modules) and shutil.which("redis-server"):
        found += ["powertools-redis", "powertools-redis-aof"]
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _client(port: int) -> Any:
    """A redis-py client of the server on ``port`` (redis-py is installed where the Redis peers run)."""
    import redis

    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


@contextlib.contextmanager
def redis_server(folder: Path, aof: bool) -> Iterator[int]:
    """A ``redis-server`` on 127.0.0.1 with its data in ``folder`` (its defaults, or the append-only
    file synced at every write); yields its port, stops it on exit."""
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    args = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", str(folder)]
    if aof:
        args += ["--appendonly", "yes", "--appendfsync", "always"]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        import redis

        while True:
            try:
                _client(port).ping()
                break
            except redis.exceptions.ConnectionError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {port}") from None
                time.sleep(0.02)
        yield port
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def key_count(port: int) -> int:
    """Keys in the Redis database (one per idempotency record)."""
    return int(_client(port).dbsize())


def dbos_database(path: Path) -> str:
    """A new SQLite file in WAL mode for DBOS's system database; its URL."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA journal_mode=WAL")
    return f"sqlite:///{path}"


# The peers' code, run in the measuring processes: ``setup(engine, where)`` returns step(key) -> None,
# which runs the peer's idempotent unit on ``key`` (and closes nothing: the process ends after it).
PEER_SETUP = """
import logging, warnings
warnings.simplefilter("ignore")
def setup(engine, where):
    if engine == "dbos-sqlite":
        from dbos import DBOS, SetWorkflowID
        DBOS(config={"name": "gitledger-bench", "system_database_url": where, "run_admin_server": False,
                     "enable_otlp": False, "log_level": "ERROR"})
        @DBOS.workflow()
        def unit(key: str) -> str:
            return "ok"
        DBOS.launch()
        def step(key):
            with SetWorkflowID(key):
                unit(key)
        return step
    import redis
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
    from aws_lambda_powertools.utilities.idempotency.persistence.cache import CachePersistenceLayer
    layer = CachePersistenceLayer(client=redis.Redis(host="127.0.0.1", port=int(where)))
    @idempotent_function(data_keyword_argument="step", persistence_store=layer,
                         config=IdempotencyConfig(expires_after_seconds=10**8))
    def unit(step: dict) -> str:
        return "ok"
    return lambda key: unit(step={"key": key})
"""

# in process: build PEER_SIZE entries, then fresh and done steps as bench_store's CHILD measures them
CHILD = (
    PEER_SETUP
    + """
import json, random, sys, time
engine, where, size, reps, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
step = setup(engine, where)
for i in range(size):
    step(f"{tag}-entry-{i}")
drawn = list(range(size))
random.Random(tag).shuffle(drawn)
out = {"fresh": [], "done": []}
step(f"{tag}-warm")
for i in range(reps):
    t = time.perf_counter(); step(f"{tag}-fresh-{i}"); out["fresh"].append(time.perf_counter() - t)
    if i < size:
        t = time.perf_counter(); step(f"{tag}-entry-{drawn[i]}"); out["done"].append(time.perf_counter() - t)
print(json.dumps(out))
"""
)

WRITER = (
    PEER_SETUP
    + """
import json, sys, time
engine, where, wid = sys.argv[1], sys.argv[2], sys.argv[3]
seconds, start_at = float(sys.argv[4]), float(sys.argv[5])
step = setup(engine, where)
while time.time() < start_at:
    time.sleep(0.001)
t0 = time.time()
done = 0
while time.time() < start_at + seconds:
    step(f"w{wid}-s{done}")
    done += 1
print(json.dumps([t0, time.time(), done]))
"""
)

GROWER = (
    PEER_SETUP
    + """
import sys
step = setup(sys.argv[1], sys.argv[2])
for i in range(int(sys.argv[3])):
    step(f"g{i}")
"""
)


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def growth(work: Path, engine: str, n: int, python: str, env: dict[str, str]) -> dict[str, Any]:
    """Bytes a peer stores per entry over ``n`` fresh steps: as written, and compacted (SQLite:
    checkpointed and vacuumed; Redis: the append-only file rewritten, or the snapshot saved)."""
    folder = work / f"growth-{engine}"
    folder.mkdir(parents=True)
    if engine == "dbos-sqlite":
        path = folder / "dbos.sqlite"
        where = dbos_database(path)
        empty = folder_bytes(folder)
        subprocess.run([python, "-c", GROWER, engine, where, str(n)], env=env, cwd=folder, check=True)
        written = folder_bytes(folder)
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.execute("VACUUM")
        compacted = folder_bytes(folder)
        return _growth(n, written - empty, compacted - empty)
    aof = engine.endswith("-aof")
    with redis_server(folder, aof) as port:
        empty = folder_bytes(folder)
        subprocess.run([python, "-c", GROWER, engine, str(port), str(n)], env=env, cwd=folder, check=True)
        added = folder_bytes(folder) - empty
        client = _client(port)
        if aof:
            client.bgrewriteaof()
        else:
            client.bgsave()
        _wait_for_background_save(client)
        compacted = folder_bytes(folder)
    # without the append-only file nothing reaches the disk per step: a snapshot holds all there is
    return _growth(n, added if aof else None, compacted - empty)


def _wait_for_background_save(client: Any) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        info = client.info("persistence")
        if info["rdb_bgsave_in_progress"] == 0 and info["aof_rewrite_in_progress"] == 0:
            return
        time.sleep(0.05)
    raise RuntimeError("redis: the background save did not finish in 30 s")


def _growth(n: int, written: int | None, compacted: int) -> dict[str, Any]:
    return {
        "entries": n,
        "bytes_per_entry_written": None if written is None else written / n,
        "bytes_per_entry_compacted": compacted / n,
    }


@contextlib.contextmanager
def peer_store(folder: Path, engine: str) -> Iterator[str]:
    """What a peer's processes are given to reach a new, empty store: DBOS's database URL, or the port
    of a Redis server that lives as long as this context."""
    folder.mkdir(parents=True, exist_ok=True)
    if engine == "dbos-sqlite":
        yield dbos_database(folder / "dbos.sqlite")
        return
    with redis_server(folder, aof=engine.endswith("-aof")) as port:
        yield str(port)
