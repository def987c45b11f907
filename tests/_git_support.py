"""Real git repositories for tests: a bare "remote" with a work tree to commit from, and git daemon."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


def git_run(
    *args: str, cwd: Path | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run git in ``cwd`` (with ``input`` on stdin) as the tests' author; its result, whatever its exit."""
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=GIT_ENV,
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def git(*args: str, cwd: Path | None = None, input: str | None = None) -> str:
    """Run git in ``cwd`` and return its stdout; fail the test with git's stderr otherwise."""
    proc = git_run(*args, cwd=cwd, input=input)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


class RemoteRepo:
    """A bare repository (the "remote") and a work tree clone used to commit and push to it."""

    def __init__(self, root: Path, branch: str = "main") -> None:
        self.bare = root / "remote.git"
        self.work = root / "work"
        self.branch = branch
        git("init", "--quiet", "--bare", "-b", branch, str(self.bare), cwd=root)
        git("init", "--quiet", "-b", branch, str(self.work), cwd=root)
        git("remote", "add", "origin", str(self.bare), cwd=self.work)

    def commit(
        self,
        files: Mapping[str, bytes | str | None],
        message: str = "change",
        *,
        symlinks: Mapping[str, str] | None = None,
        push: bool = True,
    ) -> str:
        """Write (or, for None, delete) files, commit them all, push; return the new commit sha."""
        for rel, content in files.items():
            path = self.work / rel
            if content is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content.encode() if isinstance(content, str) else content)
        for rel, target in (symlinks or {}).items():
            path = self.work / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(target)
        git("add", "--all", ".", cwd=self.work)
        git("commit", "--quiet", "--allow-empty", "-m", message, cwd=self.work)
        if push:
            git("push", "--quiet", "origin", f"HEAD:refs/heads/{self.branch}", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work).strip()

    def head(self) -> str:
        return git("rev-parse", f"refs/heads/{self.branch}", cwd=self.bare).strip()


def stop_process(proc: subprocess.Popen[Any], timeout: float) -> None:
    """SIGTERM ``proc`` and wait up to ``timeout`` seconds for it; SIGKILL it if it is still running."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    """Serve every repository under ``base`` over git:// on loopback (push enabled); yield the URL base.

    ``git://127.0.0.1:PORT/remote.git`` then names ``base/remote.git``.
    """
    port = free_port()
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--enable=receive-pack",
            "--informative-errors",
            f"--base-path={base}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(base),
        ],
        env=GIT_ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60  # a hang bound: a busy machine starts it late
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("git daemon did not start") from None
                time.sleep(0.05)
        yield f"git://127.0.0.1:{port}"
    finally:
        stop_process(proc, 5)


class _SmartHTTPHandler(BaseHTTPRequestHandler):
    """Git's smart HTTP protocol through ``git http-backend`` (CGI), behind HTTP Basic auth."""

    server: _SmartHTTPServer

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: tests read outcomes, not access logs."""

    def _serve(self) -> None:
        expected = "Basic " + base64.b64encode(self.server.credentials.encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        env = {
            **GIT_ENV,
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": self.server.credentials.partition(":")[0],
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
        }
        for header, name in (
            ("Content-Encoding", "HTTP_CONTENT_ENCODING"),
            ("Git-Protocol", "HTTP_GIT_PROTOCOL"),
        ):
            if self.headers.get(header):
                env[name] = self.headers[header]
        proc = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60)
        head, _, payload = proc.stdout.partition(b"\r\n\r\n")
        status = 200
        headers: list[tuple[str, str]] = []
        for line in head.decode("latin-1").split("\r\n"):
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = _serve
    do_POST = _serve


class _SmartHTTPServer(ThreadingHTTPServer):
    def __init__(self, root: Path, credentials: str) -> None:
        super().__init__(("127.0.0.1", 0), _SmartHTTPHandler)
        self.root = root
        self.credentials = credentials


@contextmanager
def git_http_server(root: Path, credentials: str = "deploy:s3cr3t-token") -> Iterator[str]:
    """Serve the repositories under ``root`` over smart HTTP on loopback, requiring ``user:password``.

    Yields the base URL without credentials (``http://127.0.0.1:PORT``).
    """
    with serving(_SmartHTTPServer(root, credentials)) as url:
        yield url


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[str]:
    """Run ``server`` (bound to loopback) on a thread; yield its base URL (``http://127.0.0.1:PORT``);
    shut it down on exit."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextmanager
def silent_server() -> Iterator[str]:
    """A TCP server on loopback that accepts connections and never answers: a hung remote.

    Yields ``host:port``.
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _addr = listener.accept()
            except OSError:
                continue
            accepted.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in accepted:
            conn.close()
        listener.close()
