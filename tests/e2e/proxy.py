"""A loopback TCP proxy that can cut a client off from the API server (a watch gap).

``cut()`` closes every open connection and refuses new ones (accepted, then closed at once)
until ``restore()``. TLS passes through untouched: the API server's certificate names
127.0.0.1, which is where the proxy listens. Loopback only; it stops with ``close()``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from typing import Any

import yaml

LOOPBACK = "127.0.0.1"


class CuttableProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server((LOOPBACK, 0))
        self.port = int(self._listener.getsockname()[1])
        self._cut = False
        self._closed = False
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self.refused = 0
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut:
                self.refused += 1
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with self._lock:
                    self._conns.discard(s)
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def cut(self) -> None:
        self._cut = True
        with self._lock:
            conns = list(self._conns)
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def restore(self) -> None:
        self._cut = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()

    def kubeconfig(self, original: str, path: Path) -> str:
        """A copy of ``original`` whose clusters point at the proxy."""
        cfg: dict[str, Any] = yaml.safe_load(Path(original).read_text())
        for c in cfg.get("clusters") or []:
            c["cluster"]["server"] = f"https://{LOOPBACK}:{self.port}"
        path.write_text(yaml.safe_dump(cfg))
        return str(path)
