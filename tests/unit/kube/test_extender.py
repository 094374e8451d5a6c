"""The HTTP extender client (scheduler/kube/extender.py) against a real HTTP server on
loopback: what each verb sends (extender/v1's Go field names), how answers are read (any
capitalisation, as Go's decoder), errors named as upstream's, TLS as upstream's transport,
and the informer store keeping raw objects only while extenders need them."""

from __future__ import annotations

import asyncio
import base64
import ssl
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from scheduler.config import ConfigError, ExtenderConfig, ExtenderTLS, parse_config
from scheduler.framework.extender import ExtenderError
from scheduler.framework.preemption import Candidate
from scheduler.kube.extender import HTTPExtender, check_tls, raw_kinds
from scheduler.kube.informer import Store
from scheduler.servingcert import self_signed
from scheduler.types import NodeInfo, PodInfo
from tests.builders import make_node, make_pod
from tests.jsonserver import JsonServer, Reply


class Server(JsonServer):
    def url(self, path: str = "/scheduler", scheme: str = "http") -> str:
        return super().url(path, scheme)


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(reply: Reply, tls: ssl.SSLContext | None = None) -> Server:
        servers.append(Server(reply, tls))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


POD = make_pod("p").req(cpu="1").info()
RAW_POD = {
    "metadata": {"name": "p", "namespace": "default", "uid": POD.uid},
    "spec": {"containers": [{"name": "c", "resources": {"limits": {"example.com/gpu": "1"}}}]},
}
NODES = [NodeInfo(make_node(n).record()) for n in ("n1", "n2")]
RAW_NODES = {n: {"metadata": {"name": n}, "status": {}} for n in ("n1", "n2")}


def extender(cfg: ExtenderConfig, pods: dict[str, Any] | None = None) -> HTTPExtender:
    known = {"default/p": RAW_POD} if pods is None else pods
    return HTTPExtender(cfg, raw_pod=known.get, raw_node=RAW_NODES.get)


def run(ext: HTTPExtender, coro: Any) -> Any:
    async def go() -> Any:
        try:
            return await coro
        finally:
            await ext.close()

    return asyncio.run(go())


def test_filter_by_names_sends_the_pod_and_reads_any_capitalisation(serve: Any) -> None:
    srv = serve(
        lambda path, body: (
            200,
            {"nodenames": ["n2"], "failedNodes": {"n1": "no GPU"}, "error": ""},
        )
    )
    cfg = ExtenderConfig(srv.url(), filter_verb="filter", node_cache_capable=True)
    ext = extender(cfg)
    result = run(ext, ext.filter(POD, NODES))
    assert (list(result.nodes), dict(result.failed)) == (["n2"], {"n1": "no GPU"})
    path, body = srv.seen[0]
    assert path == "/scheduler/filter"
    assert body == {"Pod": RAW_POD, "Nodes": None, "NodeNames": ["n1", "n2"]}


def test_filter_with_node_objects(serve: Any) -> None:
    srv = serve(
        lambda path, body: (
            200,
            {
                "Nodes": {"items": [body["Nodes"]["items"][0]]},
                "FailedAndUnresolvableNodes": {"n2": "gone for good"},
            },
        )
    )
    ext = extender(ExtenderConfig(srv.url() + "/", filter_verb="filter"))
    result = run(ext, ext.filter(POD, NODES))
    assert list(result.nodes) == ["n1"]
    assert dict(result.failed_and_unresolvable) == {"n2": "gone for good"}
    assert srv.seen[0][0] == "/scheduler/filter"  # the prefix's trailing slash trimmed
    assert srv.seen[0][1]["Nodes"]["items"] == [RAW_NODES["n1"], RAW_NODES["n2"]]
    assert srv.seen[0][1]["NodeNames"] is None


def test_the_error_of_an_answer_is_an_extender_error(serve: Any) -> None:
    srv = serve(lambda path, body: (200, {"Error": "quota service down"}))
    ext = extender(ExtenderConfig(srv.url(), filter_verb="filter"))
    with pytest.raises(ExtenderError, match=r"^quota service down$"):
        run(ext, ext.filter(POD, NODES))


def test_a_status_other_than_200_is_named_as_upstream(serve: Any) -> None:
    srv = serve(lambda path, body: (500, {}))
    ext = extender(ExtenderConfig(srv.url(), prioritize_verb="prio", weight=1))
    with pytest.raises(ExtenderError) as e:
        run(ext, ext.prioritize(POD, NODES))
    assert str(e.value) == f"failed prio with extender at URL {srv.url()}/prio, code 500"


def test_an_unreachable_extender(serve: Any) -> None:
    srv = serve(lambda path, body: (200, {}))
    url = srv.url()
    srv.stop()
    ext = extender(ExtenderConfig(url, filter_verb="filter"))
    with pytest.raises(ExtenderError, match=f'^Post "{url}/filter": '):
        run(ext, ext.filter(POD, NODES))


def test_a_slow_extender_times_out(serve: Any) -> None:
    release = threading.Event()

    def slow(path: str, body: Any) -> tuple[int, Any]:
        release.wait(5)
        return 200, {}

    srv = serve(slow)
    ext = extender(ExtenderConfig(srv.url(), filter_verb="filter", http_timeout=0.2))
    try:
        with pytest.raises(ExtenderError, match=r"no response within 0\.2 s"):
            run(ext, ext.filter(POD, NODES))
    finally:
        release.set()


def test_the_environment_s_proxy_is_used_as_go_s_transport_uses_it(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP_PROXY (or HTTPS_PROXY for https) carries the calls, in absolute form, unless
    NO_PROXY names the host or the host is loopback (Go's ProxyFromEnvironment)."""
    proxy = serve(lambda path, body: (200, {"NodeNames": ["n1"]}))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url(""))
    far = "http://extender.example:8123/scheduler"  # never resolved: the proxy answers
    ext = extender(ExtenderConfig(far, filter_verb="filter", node_cache_capable=True))
    assert ext.proxy == proxy.url("")
    result = run(ext, ext.filter(POD, NODES))
    assert list(result.nodes) == ["n1"]
    assert proxy.seen[0][0] == f"{far}/filter"
    assert proxy.seen[0][1]["NodeNames"] == ["n1", "n2"]
    # A loopback extender is reached directly, whatever the environment says.
    near = serve(lambda path, body: (200, {"NodeNames": ["n2"]}))
    ext = extender(ExtenderConfig(near.url(), filter_verb="filter", node_cache_capable=True))
    assert ext.proxy is None
    assert list(run(ext, ext.filter(POD, NODES)).nodes) == ["n2"]
    assert near.seen[0][0] == "/scheduler/filter" and len(proxy.seen) == 1
    # NO_PROXY names the host; https goes by HTTPS_PROXY only.
    monkeypatch.setenv("NO_PROXY", "extender.example")
    assert extender(ExtenderConfig(far, filter_verb="filter")).proxy is None
    monkeypatch.delenv("NO_PROXY")
    tls = ExtenderConfig("https://extender.example/s", filter_verb="filter", enable_https=True)
    assert extender(tls).proxy is None
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    assert extender(tls).proxy == "http://proxy.example:3128"


def test_a_proxy_that_is_not_there_is_an_unreachable_extender(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = serve(lambda path, body: (200, {}))
    url = gone.url("")
    gone.stop()
    monkeypatch.setenv("HTTP_PROXY", url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    ext = extender(ExtenderConfig("http://extender.example/s", filter_verb="filter"))
    with pytest.raises(ExtenderError, match=f'^Post "http://extender.example/s/filter": .*{url}'):
        run(ext, ext.filter(POD, NODES))


def test_answers_that_are_not_what_the_verb_returns(serve: Any) -> None:
    srv = serve(lambda path, body: (200, b"{not json"))
    ext = extender(ExtenderConfig(srv.url(), filter_verb="filter"))
    with pytest.raises(ExtenderError, match="answered: not JSON"):
        run(ext, ext.filter(POD, NODES))
    srv2 = serve(lambda path, body: (200, [{"Host": "n1", "Score": "high"}]))
    ext2 = extender(ExtenderConfig(srv2.url(), prioritize_verb="p", weight=1))
    with pytest.raises(ExtenderError, match="score 'high' is not an integer"):
        run(ext2, ext2.prioritize(POD, NODES))


def test_prioritize_and_bind(serve: Any) -> None:
    def reply(path: str, body: Any) -> tuple[int, Any]:
        if path.endswith("/prio"):
            return 200, [{"Host": "n1", "Score": 7}, {"host": "n2", "score": 3}]
        return 200, {"Error": ""}

    srv = serve(reply)
    ext = extender(ExtenderConfig(srv.url(), prioritize_verb="prio", bind_verb="bind", weight=2))
    assert run(ext, ext.prioritize(POD, NODES)) == [("n1", 7), ("n2", 3)]
    ext = extender(ExtenderConfig(srv.url(), prioritize_verb="prio", bind_verb="bind", weight=2))
    run(ext, ext.bind(POD, "n1"))
    assert srv.seen[-1] == (
        "/scheduler/bind",
        {"PodName": "p", "PodNamespace": "default", "PodUID": POD.uid, "Node": "n1"},
    )


def test_preempt_sends_victims_by_uid_or_whole_and_reads_meta_victims(serve: Any) -> None:
    victim = make_pod("v").node("n1").info()
    raw_victim = {"metadata": {"name": "v", "namespace": "default", "uid": victim.uid}}
    srv = serve(
        lambda path, body: (
            200,
            {
                "NodeNameToMetaVictims": {
                    "n1": {"Pods": [{"UID": victim.uid}], "NumPDBViolations": 2}
                }
            },
        )
    )
    cand = Candidate("n1", (victim,), 1)
    cached = extender(ExtenderConfig(srv.url(), preempt_verb="preempt", node_cache_capable=True))
    assert run(cached, cached.process_preemption(POD, [cand])) == {"n1": ([victim.uid], 2)}
    assert srv.seen[-1] == (
        "/scheduler/preempt",
        {
            "Pod": RAW_POD,
            "NodeNameToVictims": None,
            "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": victim.uid}], "NumPDBViolations": 1}},
        },
    )
    whole = extender(
        ExtenderConfig(srv.url(), preempt_verb="preempt"),
        {"default/p": RAW_POD, "default/v": raw_victim},
    )
    run(whole, whole.process_preemption(POD, [cand]))
    assert srv.seen[-1][1]["NodeNameToVictims"] == {
        "n1": {"Pods": [raw_victim], "NumPDBViolations": 1}
    }
    assert srv.seen[-1][1]["NodeNameToMetaVictims"] is None


def test_interest_in_managed_resources() -> None:
    gpu = ExtenderConfig("http://127.0.0.1:1", managed_resources=(("example.com/gpu", False),))
    other = ExtenderConfig("http://127.0.0.1:1", managed_resources=(("example.com/fpga", True),))
    everyone = ExtenderConfig("http://127.0.0.1:1")
    init_only = {
        "default/p": {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "containers": [{"name": "c"}],
                "initContainers": [
                    {"name": "i", "resources": {"requests": {"example.com/fpga": "1"}}}
                ],
            },
        }
    }
    assert extender(gpu).is_interested(POD)
    assert not extender(other).is_interested(POD)
    assert extender(everyone).is_interested(POD)
    assert extender(other, init_only).is_interested(POD)


def test_https_without_a_ca_skips_verification_and_with_one_verifies(
    serve: Any, tmp_path: Any
) -> None:
    cert, key = self_signed("127.0.0.1")
    (tmp_path / "c.pem").write_bytes(cert)
    (tmp_path / "k.pem").write_bytes(key)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    srv = serve(lambda path, body: (200, {"NodeNames": ["n1"]}), tls=server_ctx)
    url = srv.url(scheme="https")

    base = ExtenderConfig(url, filter_verb="f", node_cache_capable=True)
    plain = extender(base)  # https, no CA, enableHTTPS off: verified against system CAs
    with pytest.raises(ExtenderError, match="TLS"):
        run(plain, plain.filter(POD, NODES))
    loose = extender(
        ExtenderConfig(url, filter_verb="f", node_cache_capable=True, enable_https=True)
    )
    assert list(run(loose, loose.filter(POD, NODES)).nodes) == ["n1"]
    pinned = extender(
        ExtenderConfig(url, filter_verb="f", node_cache_capable=True, tls=ExtenderTLS(ca_data=cert))
    )
    assert list(run(pinned, pinned.filter(POD, NODES)).nodes) == ["n1"]


def test_tls_material_that_does_not_load_is_a_config_error(tmp_path: Any) -> None:
    raw = {
        "extenders": [
            {
                "urlPrefix": "https://127.0.0.1:1",
                "tlsConfig": {"caData": base64.b64encode(b"not a certificate").decode()},
            }
        ]
    }
    cfg = parse_config(raw, "cfg.yaml")
    with pytest.raises(ConfigError, match=r"^cfg.yaml: extenders \(https://127.0.0.1:1\)"):
        check_tls(cfg.extenders, "cfg.yaml")


def test_raw_objects_are_kept_only_as_asked() -> None:
    assert raw_kinds(()) == ("", False)
    cached = ExtenderConfig("http://x", node_cache_capable=True, preempt_verb="preempt")
    assert raw_kinds((cached,)) == ("pending", False)
    assert raw_kinds((cached, ExtenderConfig("http://y"))) == ("pending", True)
    # Victims are sent whole to a preempting extender that does not cache nodes.
    assert raw_kinds((ExtenderConfig("http://y", preempt_verb="p"),)) == ("all", True)

    def decode(raw: Any) -> PodInfo:
        if raw.get("bad"):
            raise ValueError("cannot read it")
        return make_pod(raw["metadata"]["name"]).info()

    store: Store[PodInfo] = Store(
        namespaced=True,
        decode=decode,
        on_error=lambda raw, e: None,
        keep_raw=lambda raw: not raw["spec"].get("nodeName"),
    )

    def obj(rv: str, node: str = "") -> dict[str, Any]:
        return {
            "metadata": {"name": "p", "namespace": "default", "uid": "u", "resourceVersion": rv},
            "spec": {"nodeName": node},
        }

    store.apply("ADDED", obj("1"))
    assert store.raw("default/p") == obj("1")
    store.apply("MODIFIED", obj("2", node="n1"))  # bound: no longer sent to extenders
    assert store.raw("default/p") is None
    listing = store.listing()
    listing.add(obj("3"))
    listing.commit()
    assert store.raw("default/p") == obj("3")
    # A version that does not decode leaves the record, and its raw form, as they were.
    broken = {**obj("4"), "bad": True}
    store.apply("MODIFIED", broken)
    assert store.get("default/p") is not None and store.raw("default/p") == obj("3")
    store.apply("DELETED", obj("5"))
    assert store.raw("default/p") is None
    plain: Store[PodInfo] = Store(namespaced=True, decode=decode, on_error=lambda r, e: None)
    plain.apply("ADDED", obj("1"))
    assert plain.raw("default/p") is None
