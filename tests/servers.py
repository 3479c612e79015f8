"""Real git servers on 127.0.0.1 for the transport tests: ``git http-backend`` behind nginx + fcgiwrap
(smart HTTP), sshd (git over SSH), ``git daemon`` and plain file remotes.

Each server serves one folder; :class:`Served` names where a bare repository goes and the URL a clone
uses for it. Everything runs from a temporary folder with its own configuration and stops with the
fixture; a server whose binary is missing skips the test (``.ci/run`` installs them on Debian).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testing.repos import git

START_TIMEOUT = 15.0


@dataclass(frozen=True)
class Served:
    """A server's folder and how to reach a repository in it."""

    kind: str  # file, daemon, http, ssh
    root: Path
    base: str  # URL prefix: f"{base}/name.git"
    env: dict[str, str]  # what git clients need (e.g. GIT_SSH_COMMAND)

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                detail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
                pytest.skip(f"{what} did not start: {detail}")
            time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes], group: bool = False) -> None:
    """Stop a server (with ``group``: its whole process group, e.g. fcgiwrap's prefork children)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if group:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGTERM)


def _binary(name: str) -> str:
    for folder in (*os.environ.get("PATH", "").split(os.pathsep), "/usr/sbin", "/usr/local/sbin", "/sbin"):
        candidate = Path(folder or ".") / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    pytest.skip(f"{name} is not installed (.ci/run installs it on Debian/Ubuntu)")


def file_server(tmp: Path) -> Iterator[Served]:
    root = tmp / "file-served"
    root.mkdir()
    yield Served("file", root, str(root), {})


def daemon_server(tmp: Path) -> Iterator[Served]:
    exec_path = git("--exec-path", cwd=tmp)
    if not (Path(exec_path) / "git-daemon").exists():
        pytest.skip("git daemon is not installed")
    root = tmp / "daemon-served"
    root.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        ["git", "daemon", "--export-all", "--enable=receive-pack", "--reuseaddr", f"--base-path={root}",
         f"--port={port}", "--listen=127.0.0.1", str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_port(port, proc, "git daemon")
        yield Served("daemon", root, f"git://127.0.0.1:{port}", {})
    finally:
        _stop(proc)


NGINX_CONF = """
daemon off;
master_process on;
{user}
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    fastcgi_temp_path {tmp}/fastcgi;
    proxy_temp_path {tmp}/proxy;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    client_max_body_size 0;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            fastcgi_pass unix:{tmp}/fcgiwrap.sock;
            fastcgi_read_timeout 120s;
            fastcgi_param SCRIPT_FILENAME {backend};
            fastcgi_param QUERY_STRING $query_string;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_param CONTENT_TYPE $content_type;
            fastcgi_param CONTENT_LENGTH $content_length;
            fastcgi_param PATH_INFO $uri;
            fastcgi_param SERVER_PROTOCOL $server_protocol;
            fastcgi_param REMOTE_ADDR $remote_addr;
            fastcgi_param HTTP_CONTENT_ENCODING $http_content_encoding;
            fastcgi_param GIT_HTTP_EXPORT_ALL "";
            fastcgi_param GIT_PROJECT_ROOT {root};
            fastcgi_param REMOTE_USER tester;
        }}
    }}
}}
"""


def http_server(tmp: Path) -> Iterator[Served]:
    """Smart HTTP: nginx in front of fcgiwrap running ``git http-backend`` (push allowed)."""
    nginx, fcgiwrap = _binary("nginx"), _binary("fcgiwrap")
    backend = Path(git("--exec-path", cwd=tmp)) / "git-http-backend"
    if not backend.exists():
        pytest.skip("git http-backend is not installed")
    work = tmp / "nginx"
    work.mkdir()
    root = tmp / "http-served"
    root.mkdir()
    port = free_port()
    user = "user root root;" if os.geteuid() == 0 else ""
    conf = work / "nginx.conf"
    conf.write_text(NGINX_CONF.format(user=user, tmp=work, port=port, backend=backend, root=root))
    wrap = subprocess.Popen(
        [fcgiwrap, "-c", "4", "-s", f"unix:{work}/fcgiwrap.sock"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, process_group=0,
    )  # fmt: skip
    server = None
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not (work / "fcgiwrap.sock").exists():
            if wrap.poll() is not None or time.monotonic() > deadline:
                pytest.skip("fcgiwrap did not start")
            time.sleep(0.02)
        server = subprocess.Popen(
            [nginx, "-p", str(work), "-c", str(conf), "-e", str(work / "error.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_port(port, server, "nginx", work / "error.log")
        yield Served("http", root, f"http://127.0.0.1:{port}", {})
    finally:
        if server is not None:
            _stop(server)
        _stop(wrap, group=True)


SSHD_CONF = """
Port {port}
ListenAddress 127.0.0.1
HostKey {tmp}/host_key
PidFile {tmp}/sshd.pid
AuthorizedKeysFile {tmp}/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
AllowUsers {user}
SetEnv PATH={path}
"""


def ssh_server(tmp: Path) -> Iterator[Served]:
    """git over SSH: an sshd of our own on a loopback port, a key made for the test."""
    sshd, keygen = _binary("sshd"), _binary("ssh-keygen")
    if shutil.which("ssh") is None:
        pytest.skip("ssh (the client) is not installed")
    work = tmp / "sshd"
    work.mkdir()
    root = tmp / "ssh-served"
    root.mkdir()
    for name in ("host_key", "client_key"):
        subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(work / name)], check=True)
    (work / "authorized_keys").write_text((work / "client_key.pub").read_text())
    if os.geteuid() == 0:
        with contextlib.suppress(OSError):
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    port = free_port()
    user = getpass.getuser()
    git_path = os.path.dirname(shutil.which("git") or "/usr/bin/git")
    conf = work / "sshd_config"
    conf.write_text(SSHD_CONF.format(port=port, tmp=work, user=user, path=f"{git_path}:/usr/bin:/bin"))
    log = work / "sshd.log"
    proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(conf), "-E", str(log)], stdout=subprocess.DEVNULL)
    try:
        _wait_port(port, proc, "sshd", log)
        command = (
            f"ssh -i {work / 'client_key'} -o IdentitiesOnly=yes -o BatchMode=yes "
            f"-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
        )
        yield Served("ssh", root, f"ssh://{user}@127.0.0.1:{port}{root}", {"GIT_SSH_COMMAND": command})
    finally:
        _stop(proc)


SERVERS = {"file": file_server, "daemon": daemon_server, "http": http_server, "ssh": ssh_server}
