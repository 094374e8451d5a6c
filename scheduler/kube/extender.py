"""HTTP scheduler extenders (upstream's HTTPExtender, pkg/scheduler/extender.go).

Each verb is a POST of JSON to ``<urlPrefix>/<verb>`` with the extender/v1 types, whose Go
fields carry no JSON tags: keys are the field names (``Pod``, ``Nodes``, ``NodeNames``;
answers ``NodeNames``, ``FailedNodes``, ``FailedAndUnresolvableNodes``, ``Error``; a list
of ``{"Host", "Score"}``; ``PodName``, ``PodNamespace``, ``PodUID``, ``Node``), and Go
reads answers with any capitalisation, as here.

What is sent: the pod as the informer last received it; with ``nodeCacheCapable`` the
nodes' names, else the Node objects (``{"items": [...]}``), so their raw form is kept while
such an extender is configured (``raw_kinds``). A reply must be 200 within
``httpTimeout`` (5 s by default); anything else is an ExtenderError naming the extender.

Calls go out on a keep-alive connection pool of their own (scheduler/kube/http1.py): one
per extender, never behind the API client's rate limit. HTTPS as upstream's transport:
``tlsConfig``'s CA, client certificate and server name; ``insecure``, or ``enableHTTPS``
without a CA, skips verification. As Go's transport, an extender is reached through the
proxy HTTPS_PROXY or HTTP_PROXY names (not for a host NO_PROXY names, localhost or a
loopback address); its calls then go through aiohttp (the pool speaks to the host itself).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import aiohttp
import orjson

from scheduler.config import ConfigError, ExtenderConfig, ExtenderTLS
from scheduler.framework.extender import ExtenderError, ExtenderFilterResult
from scheduler.framework.preemption import Candidate
from scheduler.kube.client import environment_proxy
from scheduler.kube.http1 import ConnectionPool, HttpError
from scheduler.types import NodeInfo, PodInfo

__all__ = ["HTTPExtender", "build_extenders", "check_tls", "raw_kinds"]

Raw = Mapping[str, Any]


def raw_kinds(extenders: Sequence[ExtenderConfig]) -> tuple[str, bool]:
    """Which raw objects the extenders need: pods' ("": none, "pending": those we are to
    schedule, "all": bound ones too, as victims of preemption are sent whole), and
    whether nodes'."""
    pods = ""
    if extenders:
        victims = any(e.preempt_verb and not e.node_cache_capable for e in extenders)
        pods = "all" if victims else "pending"
    return pods, any(not e.node_cache_capable for e in extenders)


class HTTPExtender:
    def __init__(
        self,
        config: ExtenderConfig,
        *,
        raw_pod: Callable[[str], Raw | None],
        raw_node: Callable[[str], Raw | None],
    ) -> None:
        self.config = config
        self._raw_pod = raw_pod
        self._raw_node = raw_node
        self._managed = frozenset(n for n, _ in config.managed_resources)
        self._url = config.url_prefix.rstrip("/")
        self._tls = _tls_context(config) if config.url_prefix.startswith("https") else None
        self._server_hostname = (config.tls.server_name or None) if config.tls else None
        self._pool = ConnectionPool(
            config.url_prefix,
            ssl_context=self._tls,
            server_hostname=self._server_hostname,
            size=16,
        )
        # The environment's proxy for this extender (read once), else None: the pool.
        self.proxy = environment_proxy(config.url_prefix)
        self._session: aiohttp.ClientSession | None = None

    @property
    def name(self) -> str:
        return self.config.url_prefix

    @property
    def ignorable(self) -> bool:
        return self.config.ignorable

    @property
    def weight(self) -> int:
        return self.config.weight

    def is_filter(self) -> bool:
        return bool(self.config.filter_verb)

    def is_prioritizer(self) -> bool:
        return bool(self.config.prioritize_verb)

    def is_binder(self) -> bool:
        return bool(self.config.bind_verb)

    def supports_preemption(self) -> bool:
        return bool(self.config.preempt_verb)

    def is_interested(self, pod: PodInfo) -> bool:
        if not self._managed:
            return True
        raw = self._raw_pod(pod.key)
        if raw is None:  # (never for a pod we schedule) its effective requests tell
            return any(name in self._managed for name in pod.requests.scalar)
        spec = raw.get("spec") or {}
        for group in ("containers", "initContainers"):
            for c in spec.get(group) or ():
                res = c.get("resources") or {}
                for part in ("requests", "limits"):
                    if any(name in self._managed for name in res.get(part) or ()):
                        return True
        return False

    # ------------------------------------------------------------------ verbs
    async def filter(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> ExtenderFilterResult:
        verb = self.config.filter_verb
        answer = _fields(await self._send(verb, self._args(pod, nodes)), verb, self._url)
        if answer.get("error"):
            raise ExtenderError(str(answer["error"]))
        names: list[str] = []
        listed = answer.get("nodenames")
        if self.config.node_cache_capable and listed is not None:
            if not isinstance(listed, list):
                raise self._malformed(verb, "NodeNames is not a list")
            names = [str(n) for n in listed]
        elif answer.get("nodes") is not None:
            items = _fields(answer["nodes"], verb, self._url).get("items") or []
            try:
                names = [str(item["metadata"]["name"]) for item in items]
            except (TypeError, KeyError) as e:
                raise self._malformed(verb, f"a node without metadata.name ({e})") from e
        return ExtenderFilterResult(
            names,
            self._failed(answer.get("failednodes"), verb),
            self._failed(answer.get("failedandunresolvablenodes"), verb),
        )

    async def prioritize(
        self, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> Sequence[tuple[str, int]]:
        verb = self.config.prioritize_verb
        answer = await self._send(verb, self._args(pod, nodes))
        if not isinstance(answer, list):
            raise self._malformed(verb, "expected a list of host priorities")
        out: list[tuple[str, int]] = []
        for item in answer:
            f = _fields(item, verb, self._url)
            score = f.get("score", 0)
            if isinstance(score, bool) or not isinstance(score, int):
                raise self._malformed(verb, f"score {score!r} is not an integer")
            out.append((str(f.get("host", "")), score))
        return out

    async def bind(self, pod: PodInfo, node: str) -> None:
        verb = self.config.bind_verb
        args = {"PodName": pod.name, "PodNamespace": pod.namespace, "PodUID": pod.uid, "Node": node}
        answer = _fields(await self._send(verb, args), verb, self._url)
        if answer.get("error"):
            raise ExtenderError(str(answer["error"]))

    async def process_preemption(
        self, pod: PodInfo, candidates: Sequence[Candidate]
    ) -> Mapping[str, tuple[Sequence[str], int]]:
        verb = self.config.preempt_verb
        raw = self._raw_pod(pod.key)
        if raw is None:
            raise ExtenderError(f"extender {self.name}: pod {pod.key}: its object is not at hand")
        args: dict[str, Any] = {"Pod": raw}
        if self.config.node_cache_capable:
            args["NodeNameToVictims"] = None
            args["NodeNameToMetaVictims"] = {
                c.node_name: {
                    "Pods": [{"UID": v.uid} for v in c.victims],
                    "NumPDBViolations": c.num_pdb_violations,
                }
                for c in candidates
            }
        else:
            victims: dict[str, Any] = {}
            for c in candidates:
                pods = []
                for v in c.victims:
                    obj = self._raw_pod(v.key)
                    if obj is None:
                        raise ExtenderError(
                            f"extender {self.name}: pod {v.key}: its object is not at hand"
                        )
                    pods.append(obj)
                victims[c.node_name] = {"Pods": pods, "NumPDBViolations": c.num_pdb_violations}
            args["NodeNameToVictims"] = victims
            args["NodeNameToMetaVictims"] = None
        answer = _fields(await self._send(verb, args), verb, self._url)
        chosen = answer.get("nodenametometavictims")
        if chosen is None:
            return {}
        if not isinstance(chosen, dict):
            raise self._malformed(verb, "NodeNameToMetaVictims is not an object")
        out: dict[str, tuple[Sequence[str], int]] = {}
        for node, meta in chosen.items():
            if meta is None:
                out[str(node)] = ((), 0)
                continue
            f = _fields(meta, verb, self._url)
            pdb = f.get("numpdbviolations", 0)
            if isinstance(pdb, bool) or not isinstance(pdb, int):
                raise self._malformed(verb, f"NumPDBViolations {pdb!r} is not an integer")
            uids = [str(_fields(p, verb, self._url).get("uid", "")) for p in f.get("pods") or ()]
            out[str(node)] = (uids, pdb)
        return out

    async def close(self) -> None:
        await self._pool.close()
        if self._session is not None:
            await self._session.close()

    # ------------------------------------------------------------------ plumbing
    def _args(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> dict[str, Any]:
        raw = self._raw_pod(pod.key)
        if raw is None:
            raise ExtenderError(f"extender {self.name}: pod {pod.key}: its object is not at hand")
        if self.config.node_cache_capable:
            return {"Pod": raw, "Nodes": None, "NodeNames": [ni.name for ni in nodes]}
        items = []
        for ni in nodes:
            node = self._raw_node(ni.name)
            if node is None:
                raise ExtenderError(
                    f"extender {self.name}: node {ni.name}: its object is not at hand"
                )
            items.append(node)
        return {"Pod": raw, "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}

    async def _send(self, verb: str, args: Mapping[str, Any]) -> Any:
        url = f"{self._url}/{verb}"
        try:
            if self.proxy is None:
                status, body = await self._pool.request(
                    "POST",
                    f"/{verb}",
                    headers={"Content-Type": "application/json"},
                    body=orjson.dumps(args),
                    timeout=self.config.http_timeout,
                )
            else:
                status, body = await self._post_via_proxy(url, orjson.dumps(args))
        except HttpError as e:
            raise ExtenderError(f'Post "{url}": {e}') from e
        if status != 200:
            raise ExtenderError(f"failed {verb} with extender at URL {url}, code {status}")
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise self._malformed(verb, f"not JSON: {e}") from e

    async def _post_via_proxy(self, url: str, body: bytes) -> tuple[int, bytes]:
        """POST ``body`` to ``url`` through ``self.proxy`` (aiohttp: HTTP in absolute
        form, HTTPS by CONNECT, then TLS with the extender's settings). Failures are
        HttpErrors, as the pool's."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(trust_env=False)
        try:
            async with self._session.post(
                url,
                data=body,
                headers={"Content-Type": "application/json"},
                proxy=self.proxy,
                ssl=self._tls if self._tls is not None else True,
                server_hostname=self._server_hostname,
                timeout=aiohttp.ClientTimeout(total=self.config.http_timeout),
            ) as reply:
                return reply.status, await reply.read()
        except (aiohttp.ClientError, OSError) as e:
            raise HttpError(f"through proxy {self.proxy}: {type(e).__name__}: {e}") from e
        except TimeoutError as e:
            raise HttpError(
                f"no response within {self.config.http_timeout:g} s (through proxy {self.proxy})"
            ) from e

    def _malformed(self, verb: str, problem: str) -> ExtenderError:
        return ExtenderError(f"extender {self._url}/{verb} answered: {problem}")

    def _failed(self, raw: Any, verb: str) -> dict[str, str]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self._malformed(verb, "a failed-nodes map is not an object")
        return {str(k): str(v) for k, v in raw.items()}


def _fields(raw: Any, verb: str, url: str) -> dict[str, Any]:
    """An answer object with its keys lower-cased (Go matches field names so)."""
    if not isinstance(raw, dict):
        raise ExtenderError(f"extender {url}/{verb} answered: expected a JSON object")
    return {str(k).lower(): v for k, v in raw.items()}


def _tls_context(config: ExtenderConfig) -> ssl.SSLContext:
    tls = config.tls or ExtenderTLS()
    has_ca = bool(tls.ca_file or tls.ca_data)
    ctx = ssl.create_default_context(
        cafile=tls.ca_file or None, cadata=tls.ca_data.decode() if tls.ca_data else None
    )
    if tls.cert_file or tls.cert_data:
        _load_client_cert(ctx, tls)
    if tls.insecure or (config.enable_https and not has_ca):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _load_client_cert(ctx: ssl.SSLContext, tls: ExtenderTLS) -> None:
    """The client certificate, from files or from the inline PEM data (which the ssl
    module reads from files only: written to a private temporary one, then removed)."""
    if tls.cert_file:
        ctx.load_cert_chain(tls.cert_file, keyfile=tls.key_file or None)
        return
    fd, path = tempfile.mkstemp(prefix="py-scheduler-extender-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(tls.cert_data + b"\n" + tls.key_data)
        ctx.load_cert_chain(path)
    finally:
        os.unlink(path)


def check_tls(configs: Sequence[ExtenderConfig], source: str = "<config>") -> None:
    """Load every https extender's TLS material now (files, inline PEM), so that a bad
    one stops the start with a ConfigError naming the extender."""
    for cfg in configs:
        if not cfg.url_prefix.startswith("https"):
            continue
        try:
            _tls_context(cfg)
        except (ssl.SSLError, OSError, ValueError) as e:
            raise ConfigError(f"{source}: extenders ({cfg.url_prefix}): tlsConfig: {e}") from e


def build_extenders(
    configs: Sequence[ExtenderConfig],
    *,
    raw_pod: Callable[[str], Raw | None],
    raw_node: Callable[[str], Raw | None],
) -> list[HTTPExtender]:
    """The configured extenders, in the order they are asked (ignorable ones last: the
    config keeps that order)."""
    check_tls(configs)
    return [HTTPExtender(cfg, raw_pod=raw_pod, raw_node=raw_node) for cfg in configs]
