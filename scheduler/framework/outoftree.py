"""Out-of-tree plugins: finding them, and guarding the scheduler against them.

What it owns:

- ``discover``: the plugin classes a configuration may name, from the entry-point group
  ``py_scheduler.plugins`` of installed packages (entry name = plugin name, value =
  ``module:Class``) and from the configuration's ``pluginModules`` map (the same, for local
  modules on ``sys.path``). Configuration names win over entry points.
- ``instantiate``: ``Class(args)``, where ``args`` is the plugin's ``pluginConfig`` entry (an
  empty map when there is none), or ``Class(args, handle)`` when the class takes a second
  argument: the FrameworkHandle (waiting pods, for Permit plugins). The class validates its
  args and raises ``ValueError`` (or ``TypeError``) with a message that names the field;
  the configuration loader turns that into its usual file-and-field error (exit 2).
- ``guard``: a wrapper with exactly the extension points the plugin implements, each
  call guarded: an exception in PreFilter, Filter, PreScore or PostFilter becomes an Error
  status naming the plugin (in Sign, an unsigned pod); in Score or NormalizeScore it
  becomes ``PluginRaised``, which
  the scheduling cycle reports as an Error for that pod. Either way the pod gets an Error
  status naming the plugin and the scheduler goes on serving other pods. An exception in
  PreEnqueue is an Error status too: the pod stays gated until the plugin lets it in; in
  Reserve, Permit, PreBindPreFlight, PreBind or Bind (also an ``async def pre_bind`` or
  ``async def bind``, the two points that may be coroutine functions) an Error status that
  fails the attempt or the binding (Unreserve runs). An exception in
  Unreserve or PostBind, which return nothing and cannot fail a pod, is logged
  (``plugin_raised``) and the remaining plugins still run. An exception in QueueSort's
  ``less`` orders that pair as PrioritySort would (the first one is logged).

The public names a plugin author imports live in ``scheduler.plugins`` (docs/plugins.md).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.backend.queue.events import ANY
from scheduler.framework.interface import (
    ClusterEvent,
    Code,
    EventRegistration,
    SignFragment,
    Status,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "PluginRaised",
    "discover",
    "guard",
    "instantiate",
    "wants_handle",
]

ENTRY_POINT_GROUP = "py_scheduler.plugins"
# The extension points a plugin may implement (method names), in the framework's order.
_POINTS = (
    "less",
    "pre_enqueue",
    "pre_filter",
    "filter",
    "post_filter",
    "pre_score",
    "score",
    "normalize_scores",
    "sign_pod",
    "is_eligible_victim",
    "ordered_score_funcs",
    "reserve",
    "unreserve",
    "permit",
    "pre_bind_pre_flight",
    "pre_bind",
    "bind",
    "post_bind",
)
# The points that may be coroutine functions: they run in the pod's binding task.
_ASYNC_POINTS = ("pre_bind", "bind")
_STATUS_POINTS = {
    "pre_enqueue": "PreEnqueue",
    "filter": "Filter",
    "pre_score": "PreScore",
    "reserve": "Reserve",
    "pre_bind_pre_flight": "PreBindPreFlight",
    "pre_bind": "PreBind",
    "bind": "Bind",
}
# Points that return nothing and cannot fail the pod: an exception is logged and swallowed.
_NOTIFY_POINTS = ("unreserve", "post_bind")


class PluginRaised(Exception):
    """An out-of-tree plugin raised at a point that returns no Status (Score)."""

    def __init__(self, plugin: str, point: str, error: BaseException) -> None:
        super().__init__(f"running {point} plugin {plugin}: {type(error).__name__}: {error}")
        self.plugin = plugin
        self.point = point


def _load(target: str, where: str) -> type:
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{where}: expected 'module:Class', got {target!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"{where}: cannot import {module_name!r}: {e}") from e
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{where}: module {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise ValueError(f"{where}: {target!r} is not a class")
    return obj


def discover(modules: Mapping[str, str]) -> dict[str, type]:
    """Plugin name -> class: entry points first, then ``modules`` (``pluginModules``)."""
    from importlib.metadata import entry_points  # here: costly to import, rarely needed

    found: dict[str, type] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = _load(ep.value, f"entry point {ep.name} of {ENTRY_POINT_GROUP}")
    for name, target in modules.items():
        found[name] = _load(target, f"pluginModules.{name}")
    return found


def wants_handle(cls: type) -> bool:
    """Whether ``cls`` takes a second constructor argument, the FrameworkHandle."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) >= 2 or any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


def instantiate(cls: type, args: Mapping[str, Any], handle: object = None) -> object:
    """``cls(args)``, or ``cls(args, handle)`` for a class that takes a second argument
    (``wants_handle``); a bad argument raises ValueError naming the field."""
    plugin = cls(dict(args), handle) if wants_handle(cls) else cls(dict(args))
    if not any(callable(getattr(plugin, p, None)) for p in _POINTS):
        raise ValueError(f"{cls.__name__} implements no extension point ({', '.join(_POINTS)})")
    for point in _POINTS:
        if point not in _ASYNC_POINTS and inspect.iscoroutinefunction(getattr(plugin, point, None)):
            raise ValueError(
                f"{cls.__name__}.{point} is a coroutine function: only pre_bind and bind may "
                "be async (the others run within the scheduling cycle, which never waits)"
            )
    if callable(getattr(plugin, "pre_bind_pre_flight", None)) and not callable(
        getattr(plugin, "pre_bind", None)
    ):
        raise ValueError(f"{cls.__name__} implements pre_bind_pre_flight without pre_bind")
    has = [p for p in ("reserve", "unreserve") if callable(getattr(plugin, p, None))]
    if len(has) == 1:  # upstream's ReservePlugin has both: what Reserve takes, Unreserve gives
        missing = "unreserve" if has == ["reserve"] else "reserve"
        raise ValueError(f"{cls.__name__} implements {has[0]} without {missing}")
    return plugin


def _guarded(name: str, point: str, method: Callable[..., Any]) -> Callable[..., Any]:
    label = {
        "less": "QueueSort",
        "pre_enqueue": "PreEnqueue",
        "pre_filter": "PreFilter",
        "filter": "Filter",
        "post_filter": "PostFilter",
        "pre_score": "PreScore",
        "score": "Score",
        "normalize_scores": "NormalizeScore",
        "sign_pod": "Sign",
        "is_eligible_victim": "IsEligiblePod",
        "ordered_score_funcs": "OrderedScoreFuncs",
        "reserve": "Reserve",
        "unreserve": "Unreserve",
        "permit": "Permit",
        "pre_bind_pre_flight": "PreBindPreFlight",
        "pre_bind": "PreBind",
        "bind": "Bind",
        "post_bind": "PostBind",
    }[point]

    def error(e: BaseException) -> Status:
        return Status(Code.ERROR, (f"{label} plugin {name} raised {type(e).__name__}: {e}",), name)

    if point in ("pre_filter", "post_filter"):

        def call_pair(*args: Any) -> Any:
            try:
                return method(*args)
            except Exception as e:
                return None, error(e)

        return call_pair
    if point == "sign_pod":
        return _guarded_sign(name, method, error)
    if point == "permit":

        def call_permit(*args: Any) -> Any:
            try:
                return method(*args)
            except Exception as e:
                return error(e), 0.0

        return call_permit
    if point == "less":
        return _guarded_less(name, method)
    if point in _NOTIFY_POINTS:

        def call_notify(*args: Any) -> None:
            try:
                method(*args)
            except Exception as e:
                import structlog  # here: only a raising plugin needs it (simulate stays lean)

                pod = args[1] if len(args) > 1 else None
                structlog.get_logger("scheduler.plugins").warning(
                    "plugin_raised",
                    plugin=name,
                    extension_point=label,
                    pod=getattr(pod, "key", None),
                    error=f"{type(e).__name__}: {e}",
                )

        return call_notify
    if point in _ASYNC_POINTS and inspect.iscoroutinefunction(method):

        async def call_status_async(*args: Any) -> Any:
            try:
                return await method(*args)
            except Exception as e:
                return error(e)

        return call_status_async
    if point in _STATUS_POINTS:

        def call_status(*args: Any) -> Any:
            try:
                return method(*args)
            except Exception as e:
                return error(e)

        return call_status

    def call_value(*args: Any) -> Any:
        try:
            return method(*args)
        except Exception as e:
            raise PluginRaised(name, label, e) from e

    return call_value


def _guarded_sign(
    name: str, method: Callable[..., Any], error: Callable[[BaseException], Status]
) -> Callable[..., Any]:
    """A ``sign_pod`` whose exception, or answer that is not ``(fragments, Status)`` with
    SignFragments, leaves the pod unsigned (an Error status naming the plugin): the pod is
    then scheduled on its own, as any pod that cannot be signed."""

    def call_sign(pod: Any) -> Any:
        try:
            fragments, st = method(pod)
            if not isinstance(st, Status) or not all(
                isinstance(f, SignFragment) for f in fragments
            ):
                raise TypeError("sign_pod must return (a list of SignFragment, a Status)")
            return fragments, st
        except Exception as e:
            return (), error(e)

    return call_sign


def _guarded_less(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """A QueueSort ``less`` that cannot stop the queue: if it raises, the pair is ordered as
    PrioritySort would order it (higher priority first, then the earlier timestamp), and
    the first such exception is logged (a comparison runs many times per queued pod)."""
    logged = False

    def call_less(a: Any, b: Any) -> bool:
        nonlocal logged
        try:
            return bool(method(a, b))
        except Exception as e:
            if not logged:
                logged = True
                import structlog  # here: only a raising plugin needs it

                structlog.get_logger("scheduler.plugins").warning(
                    "plugin_raised",
                    plugin=name,
                    extension_point="QueueSort",
                    pod=getattr(getattr(a, "pod", None), "key", None),
                    error=f"{type(e).__name__}: {e}",
                    note="pairs it cannot order go by priority, then timestamp; "
                    "further exceptions of this plugin's less are not logged",
                )
            return bool((-a.pod.priority, a.timestamp) < (-b.pod.priority, b.timestamp))

    return call_less


def _every_event() -> list[EventRegistration]:
    return [EventRegistration(ClusterEvent(ANY, ANY))]


def guard(name: str, plugin: object) -> object:
    """A wrapper named ``name`` that has exactly the plugin's extension points, guarded."""
    attrs: dict[str, Any] = {"name": name, "plugin": plugin}
    for point in _POINTS:
        method = getattr(plugin, point, None)
        if callable(method):
            attrs[point] = staticmethod(_guarded(name, point, method))
    if "pre_filter" in attrs:
        extensions = getattr(plugin, "pre_filter_extensions", None)
        attrs["pre_filter_extensions"] = staticmethod(
            extensions if callable(extensions) else (lambda: None)
        )
    if "score" in attrs and "normalize_scores" not in attrs:
        attrs["normalize_scores"] = staticmethod(lambda state, pod, scores: None)
    events = getattr(plugin, "events_to_register", None)
    # Without hints a plugin is told of every event (upstream registers all cluster events
    # for a plugin that is no EnqueueExtensions): a pod it rejected or gated is tried again
    # on any change, never left waiting for the 5-minute flush.
    attrs["events_to_register"] = staticmethod(events if callable(events) else _every_event)
    wrapper_type = type(f"Guarded{type(plugin).__name__}", (), attrs)
    return wrapper_type()
