"""Run ``py-scheduler run`` as a separate process, as it runs in a cluster.

A SchedulerProcess writes its config to a temp file, starts the console script with the
test cluster's kubeconfig, waits for /readyz, exposes /metrics, and is stopped with SIGTERM
(or killed with SIGKILL to simulate a crash). Its JSON logs go to a file that a failing test
prints, but tests assert on API objects, never on logs alone.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def py_scheduler_command() -> list[str]:
    exe = Path(sys.executable).parent / "py-scheduler"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "scheduler"]


class SchedulerProcess:
    def __init__(
        self,
        kubeconfig: str,
        workdir: Path,
        *,
        name: str = "py-scheduler",
        config: dict[str, Any] | None = None,
        leader_elect: bool = False,
        lease_name: str | None = None,
        extra_env: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.extra_args = list(extra_args or ())
        self.workdir = workdir
        self.name = name
        self.port = free_port()
        cfg: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": name}],
            "httpBindAddress": "127.0.0.1",
            "httpPort": self.port,
        }
        if leader_elect:
            cfg["leaderElection"] = {
                "leaderElect": True,
                "leaseDuration": "6s",
                "renewDeadline": "4s",
                "retryPeriod": "1s",
                "resourceName": lease_name or name,
                "resourceNamespace": "kube-system",
            }
        for k, v in (config or {}).items():
            if k == "profiles":  # the first profile is named ``name`` unless it says
                cfg["profiles"] = [{"schedulerName": name, **v[0]}, *v[1:]]
            else:
                cfg[k] = v
        self.leader_elect = leader_elect
        self.config = cfg
        self.extra_env = extra_env or {}
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = workdir / f"{name}-{self.port}.yaml"
        self.config_path.write_text(yaml.safe_dump(cfg))
        self.log_path = workdir / f"{name}-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, wait_ready: bool = True, timeout: float = 60.0) -> SchedulerProcess:
        cmd = [
            *py_scheduler_command(),
            "run",
            "--kubeconfig",
            self.kubeconfig,
            "--config",
            str(self.config_path),
            "--leader-elect" if self.leader_elect else "--no-leader-elect",
            *self.extra_args,
        ]
        env = {**os.environ, **self.extra_env}
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        if wait_ready:
            self.wait_ready(timeout)
        return self

    @property
    def scheme(self) -> str:
        secure = self.config.get("secureServing")
        return "https" if secure is not None and secure.get("enabled", True) else "http"

    def get(
        self,
        path: str,
        timeout: float = 5.0,
        token: str | None = None,
        client_cert: tuple[Path, Path] | None = None,
    ) -> tuple[int, str]:
        """GET on the health/metrics port; HTTPS (the self-signed certificate unverified,
        as Prometheus' insecure_skip_verify) when the config enables secureServing, with a
        client certificate (certificate and key files) if given."""
        request = urllib.request.Request(f"{self.scheme}://127.0.0.1:{self.port}{path}")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if client_cert is not None:
            context.load_cert_chain(*client_cert)
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(
                    f"py-scheduler exited with {self.proc.returncode}:\n{self.tail()}"
                )
            try:
                status, _ = self.get("/readyz", timeout=1.0)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"py-scheduler not ready after {timeout}s:\n{self.tail()}")

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        """Sum of the samples of one metric whose labels include ``labels``."""
        _, text = self.get("/metrics")
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name) or line.startswith("#"):
                continue
            head, _, value = line.rpartition(" ")
            metric, _, label_text = head.partition("{")
            if metric != name:
                continue
            got = dict(
                part.split("=", 1) for part in label_text.rstrip("}").split(",") if "=" in part
            )
            got = {k: v.strip('"') for k, v in got.items()}
            if all(got.get(k) == v for k, v in (labels or {}).items()):
                total += float(value)
        return total

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])

    def log_events(self, event: str) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("event") == event:
                out.append(rec)
        return out
