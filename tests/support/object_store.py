"""A real S3-compatible object store for tests: moto's server (`moto_server`, a dev
dependency) in a process of its own, optionally behind `StoreProxy`, which counts the bytes
the store served and can stop answering for a while (a store restarting, seen from the
readers: connections refused, open ones cut).

The credentials are the fixture's own (any key works with moto); they go in the
environment of the test process only, as a user's would.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

ACCESS_KEY = "rs-test-access-key"
SECRET_KEY = "rs-test-secret-9f3c27"  # looked for in outputs: it must never appear
BUCKET = "clicks"
IN_MEMORY_OBJECT_BYTES = 1 << 30


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _wait_for(host: str, port: int, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the object store at {host}:{port} did not start in {seconds} s")


class ObjectStore:
    """moto's S3 server on host:port (`prefix`: a command to run it under, e.g. `ip netns
    exec NAME` to put it on a host of the box)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        prefix: Sequence[str] = (),
        open_actions: int | None = None,
    ):
        """`open_actions`: requests answered whatever the credentials; later ones need
        credentials the store knows (none here: each is refused, as a permission the
        credentials lack)."""
        # a port free here (a host of the box is a fresh namespace: free there too)
        self.host, self.port = host, port or free_port("127.0.0.1" if prefix else host)
        self.prefix = list(prefix)
        self.open_actions = open_actions
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        server = Path(sys.executable).parent / "moto_server"
        if not server.exists():
            pytest.skip("moto_server is not installed (pip install 'moto[server]')")
        # objects held in memory: moto spills each over ~5 MB to a temporary file and reads
        # the whole file back for every ranged GET, a cost no real store has
        env = dict(os.environ, MOTO_S3_DEFAULT_KEY_BUFFER_SIZE=str(IN_MEMORY_OBJECT_BYTES))
        if self.open_actions is not None:  # moto's IAM checks, after that many requests
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(self.open_actions)
        self.process = subprocess.Popen(
            [*self.prefix, str(server), "-H", self.host, "-p", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_for(self.host, self.port)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def filesystem(self):  # a client of the fixture's own, to put data there
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            endpoint_override=self.endpoint,
            region="us-east-1",
            allow_bucket_creation=True,
        )

    def put(self, local: Path, key: str, bucket: str = BUCKET) -> str:
        """Upload a file; its s3:// URL."""
        filesystem = self.filesystem()
        filesystem.create_dir(bucket)
        with filesystem.open_output_stream(f"{bucket}/{key}", compression=None) as out:
            out.write(local.read_bytes())
        return f"s3://{bucket}/{key}"


def credentials_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


class StoreProxy:
    """A TCP relay in front of a store: counts the bytes the store sent (`served`),
    `outage(seconds)` stops it answering for that long (open connections cut, new ones
    refused), and `cut_replies(n)` cuts the next n replies of more than CUT_AFTER bytes
    midway (a connection dropped during a read)."""

    CUT_AFTER = 32 << 10

    def __init__(self, store: ObjectStore):
        self.store = store
        self.host, self.port = "127.0.0.1", free_port()
        self.served = 0
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self._stopped = threading.Event()
        self._cuts = 0

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection((self.store.host, self.store.port))
            with self._lock:
                self._open += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def cut_replies(self, count: int) -> None:
        with self._lock:
            self._cuts = count

    def _pipe(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        sent = 0
        with contextlib.suppress(OSError):
            while data := source.recv(1 << 14):
                sent += len(data)
                cut = False
                if counted:  # counted before it is sent: a reader never holds bytes not yet counted
                    with self._lock:
                        self.served += len(data)
                        cut = self._cuts > 0 and sent > self.CUT_AFTER
                        self._cuts -= cut
                sink.sendall(data)
                if cut:
                    break
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):  # wakes the thread in accept()
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            for end in self._open:
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                    end.close()
            self._open.clear()


@contextlib.contextmanager
def running_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ObjectStore, StoreProxy]]:
    """A store on this host behind a counting proxy; the credentials in the environment."""
    credentials_env(monkeypatch)
    store = ObjectStore()
    store.start()
    proxy = StoreProxy(store)
    proxy.start()
    try:
        yield store, proxy
    finally:
        proxy.stop()
        store.stop()
