"""Command line: ``py-scheduler run | simulate | explain | version``.

Exit codes: 0 success; 1 runtime failure (e.g. leader election lost); 2 bad usage, bad
configuration or bad input (the message names the file and the field).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

from scheduler.config import (
    ConfigError,
    SchedulerConfig,
    client_feature,
    load_config,
    with_feature_gates,
)

__all__ = ["console_main", "main"]


_FEATURE_GATES_HELP = (
    "kube-scheduler's feature gates, as its flag: OpportunisticBatching=true|false (on by "
    "default, as v1.37); the others are fixed at their v1.37 defaults"
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="py-scheduler",
        description="A secondary Kubernetes scheduler with kube-scheduler's priority and "
        "preemption semantics.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="schedule pods of a cluster (the main job)")
    run.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: the configuration's clientConnection.kubeconfig, "
        "then $KUBECONFIG, then in-cluster)",
    )
    run.add_argument(
        "--config", help="KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1)"
    )
    le = run.add_mutually_exclusive_group()
    le.add_argument(
        "--leader-elect",
        dest="leader_elect",
        action="store_true",
        default=None,
        help="take part in leader election (default: from config, true)",
    )
    le.add_argument(
        "--no-leader-elect",
        dest="leader_elect",
        action="store_false",
        help="schedule without a lease (one replica only!)",
    )
    run.add_argument(
        "-v",
        "--verbosity",
        type=int,
        default=0,
        help="log verbosity (2+: a line per attempt; 4+: per node)",
    )
    run.add_argument("--port", type=int, help="health/metrics port (overrides config httpPort)")
    run.add_argument("--bind-address", help="health/metrics address (overrides httpBindAddress)")
    run.add_argument("--feature-gates", help=_FEATURE_GATES_HELP)
    run.add_argument(
        "--events-in-process",
        action="store_true",
        help="write Events from the scheduler's own process (default: a child process, "
        "which takes that work off the scheduling loop's core)",
    )

    sim = sub.add_parser("simulate", help="what the scheduler would do with a cluster dump")
    sim.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        dest="files",
        help="kubectl get -o json|yaml of Nodes, Pods, PDBs, PriorityClasses (and the "
        "Services, ReplicationControllers, ReplicaSets, StatefulSets of default spreading): "
        "a file, a directory (its .yaml/.yml/.json files) or - for stdin (repeatable)",
    )
    sim.add_argument(
        "--drain",
        action="append",
        metavar="NODE",
        help="what if NODE were drained: cordoned, its pods evicted as the Eviction API "
        "would (PDBs respected); shows where they land (repeatable)",
    )
    sim.add_argument(
        "--cordon", action="append", metavar="NODE", help="what if NODE were cordoned (repeatable)"
    )
    sim.add_argument(
        "--add",
        action="append",
        metavar="FILE",
        help="what if these pods were created (e.g. a new Deployment's pods) (repeatable)",
    )
    sim.add_argument("--config", help="KubeSchedulerConfiguration file")
    sim.add_argument("--seed", type=int, default=0, help="random seed (ties, offsets)")
    sim.add_argument("--feature-gates", help=_FEATURE_GATES_HELP)
    sim.add_argument(
        "-o",
        "--output",
        choices=("json", "text"),
        help="json (default when stdout is not a TTY) or text",
    )

    exp = sub.add_parser(
        "explain", help="why a pod is pending, or why it is where it is (live, read-only)"
    )
    exp.add_argument(
        "pod",
        metavar="[NAMESPACE/]POD",
        help="without a namespace: the kubeconfig context's namespace, as kubectl",
    )
    exp.add_argument("--kubeconfig")
    exp.add_argument("--config", help="KubeSchedulerConfiguration file")
    exp.add_argument("-o", "--output", choices=("json", "text"), default="text")

    sub.add_parser("version", help="print the version")
    return p


def _cmd_run(args: argparse.Namespace) -> int:
    import gc

    # Until the first listing is settled (scheduler.kube.live.settle_heap) the process
    # allocates almost only what it keeps (modules, then the cluster's records), so the
    # collector's passes would find nothing: about 0.1 s of CPU in the imports and half
    # the time of decoding the first LIST of the pods (docs/benchmarks.md, round 23).
    gc.disable()
    try:
        return _start(args)
    finally:
        gc.enable()


def _start(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from scheduler.logging import configure_logging

    try:
        config = with_feature_gates(load_config(args.config), args.feature_gates)
        if config.extenders:
            from scheduler.kube.extender import check_tls

            check_tls(config.extenders, str(args.config))
        watch_list = client_feature("WatchListClient", os.environ)
    except ConfigError as e:
        print(f"py-scheduler: invalid configuration: {e}", file=sys.stderr)
        return 2
    if args.port is not None:
        config = replace(config, http_port=args.port)
    if args.bind_address:
        config = replace(config, http_bind_address=args.bind_address)
    leader_elect = (
        config.leader_election.leader_elect if args.leader_elect is None else args.leader_elect
    )
    configure_logging(args.verbosity)

    from scheduler.operator import run

    kubeconfig = _kubeconfig(args, config)
    return _run_loop(
        run(
            config,
            kubeconfig=kubeconfig,
            leader_elect=leader_elect,
            event_process=not args.events_in_process,
            watch_list=watch_list,
        )
    )


def _kubeconfig(args: argparse.Namespace, config: SchedulerConfig) -> str | None:
    """--kubeconfig, else the configuration's clientConnection.kubeconfig (kube-scheduler's
    order), else $KUBECONFIG, else None (the in-cluster configuration)."""
    return args.kubeconfig or config.kubeconfig or os.environ.get("KUBECONFIG") or None


def _run_loop(main: Coroutine[Any, Any, int]) -> int:
    """The scheduler's event loop: uvloop (libuv; its transports and SSL cost less CPU per
    request and per watch line than asyncio's own loop, see docs/benchmarks.md) unless
    PY_SCHEDULER_LOOP=asyncio asks for the standard loop."""
    if os.environ.get("PY_SCHEDULER_LOOP", "uvloop") == "asyncio":
        import asyncio  # here, not at the top: simulate does not need it

        return asyncio.run(main)
    import uvloop

    return uvloop.run(main)


def _cmd_simulate(args: argparse.Namespace) -> int:
    from scheduler.simulate import main as simulate_main

    return simulate_main(args)


def _cmd_explain(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from scheduler.errors import ApiCallError
    from scheduler.explain import ExplainError, explain
    from scheduler.kube.client import context_namespace
    from scheduler.kube.live import list_cluster

    try:
        config = load_config(args.config)
    except ConfigError as e:
        print(f"py-scheduler explain: invalid configuration: {e}", file=sys.stderr)
        return 2
    kubeconfig = _kubeconfig(args, config)
    try:
        # LISTs only: explain never writes.
        objects = asyncio.run(list_cluster(kubeconfig, qps=config.qps, burst=config.burst))
    except ApiCallError as e:
        print(f"py-scheduler explain: cannot read the cluster: {e}", file=sys.stderr)
        return 1 if e.status else 2

    def lister(kind: str) -> list[dict[str, Any]]:
        return objects.get(kind, [])

    try:
        result = explain(args.pod, lister, config, default_namespace=context_namespace(kubeconfig))
    except ExplainError as e:
        print(f"py-scheduler explain: {e}", file=sys.stderr)
        return 2
    if args.output == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(result.to_text())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "version":
        from scheduler import __version__

        print(f"py-scheduler {__version__}")
        return 0
    if args.command == "run":
        return _cmd_run(args)
    if args.command == "simulate":
        return _cmd_simulate(args)
    if args.command == "explain":
        return _cmd_explain(args)
    parser.print_help(sys.stderr)
    return 2


def console_main() -> int:
    """The ``py-scheduler`` console script and ``python -m scheduler``: ``main`` on the
    process's arguments. After ``simulate`` the process leaves through ``os._exit`` once
    its output is flushed: the interpreter's teardown would free every object of the dump
    one by one (0.15-0.2 s of CPU at 32,000 objects) just before the process ends, and
    simulate registers no exit handler. ``main`` itself returns as usual, so an in-process
    caller (the tests) keeps its heap and its exit handlers."""
    argv = sys.argv[1:]
    code = main(argv)
    if argv[:1] == ["simulate"]:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            return code  # a closed pipe, say: the usual exit reports it as Python does
        os._exit(code)
    return code
