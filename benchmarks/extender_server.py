"""A scheduler extender for benchmarks: filter and prioritize over HTTP/1.1 keep-alive, on
loopback, answering both schedulers alike (kube-scheduler and py-scheduler speak the same
extender/v1 JSON), so that a cluster_bench.py run with ``--py-config extenders=...`` and
``--kube-config extenders=...`` compares what each scheduler spends around the same calls.

    .venv/bin/python benchmarks/extender_server.py --port 18888 &
    .venv/bin/python benchmarks/cluster_bench.py --size small --scenarios throughput \\
        --py-config 'extenders=[{urlPrefix: "http://127.0.0.1:18888", filterVerb: filter,
          prioritizeVerb: prioritize, weight: 1, nodeCacheCapable: true}]' \\
        --kube-config 'extenders=[...the same...]'

filter: every node the scheduler sends except one in ``--reject-every`` (by a hash of the
node's name, the same nodes for every pod), the others in FailedNodes; prioritize: a
score 0-10 from a hash of pod and node names. Node names (``nodeCacheCapable: true``) or
Node objects are both read. On SIGTERM or SIGINT it prints how many calls it answered and
the CPU seconds it used, and exits. Standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import signal
import sys
import zlib
from typing import Any

__all__ = ["answer", "main"]


def _names(args: dict[str, Any]) -> list[str]:
    if args.get("NodeNames") is not None:
        return [str(n) for n in args["NodeNames"]]
    return [str(n["metadata"]["name"]) for n in (args.get("Nodes") or {}).get("items") or ()]


def answer(verb: str, args: dict[str, Any], reject_every: int) -> Any:
    """The reply to one call (``verb`` the last part of the path)."""
    names = _names(args)
    if verb == "filter":
        keep = [n for n in names if not reject_every or zlib.crc32(n.encode()) % reject_every]
        kept = set(keep)
        failed = {n: "rejected by the benchmark extender" for n in names if n not in kept}
        if args.get("NodeNames") is not None:
            return {"NodeNames": keep, "FailedNodes": failed, "Error": ""}
        items = [n for n in args["Nodes"]["items"] if n["metadata"]["name"] in kept]
        return {"Nodes": {"items": items}, "FailedNodes": failed, "Error": ""}
    if verb == "prioritize":
        pod = str(args["Pod"]["metadata"]["name"])
        return [{"Host": n, "Score": zlib.crc32(f"{pod}/{n}".encode()) % 11} for n in names]
    raise ValueError(f"unknown verb {verb!r}")


class _Stats:
    calls = 0


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reject: int) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            length = 0
            for line in lines[1:]:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = await reader.readexactly(length)
            try:
                data = json.dumps(answer(path.rsplit("/", 1)[-1], json.loads(body), reject))
                status = "200 OK"
            except (ValueError, KeyError, TypeError) as e:
                data, status = json.dumps({"Error": str(e)}), "400 Bad Request"
            out = data.encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(out)}\r\n\r\n".encode()
                + out
            )
            await writer.drain()
            _Stats.calls += 1
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _main(port: int, reject: int) -> None:
    server = await asyncio.start_server(
        lambda r, w: _serve(r, w, reject), "127.0.0.1", port, limit=1 << 24
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"extender_server listening on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    async with server:
        await stop.wait()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps({"calls": _Stats.calls, "cpu_seconds": usage.ru_utime + usage.ru_stime}),
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=18888)
    ap.add_argument("--reject-every", type=int, default=10, help="filter out 1 node in N (0: none)")
    args = ap.parse_args(argv)
    asyncio.run(_main(args.port, args.reject_every))
    return 0


if __name__ == "__main__":
    sys.exit(main())
