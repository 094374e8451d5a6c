"""Typed deltas: what an informer hands its handler (client-go's Add/Update/Delete notifications).

A plain module at the bottom of the live layer so that the handlers (``eventhandlers``) and the
informers (``kube.informer``) share the types without importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Added", "Deleted", "Delta", "Updated"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Added(Generic[T]):
    new: T


@dataclass(frozen=True, slots=True)
class Updated(Generic[T]):
    old: T
    new: T


@dataclass(frozen=True, slots=True)
class Deleted(Generic[T]):
    old: T
    # True when a relist inferred the deletion (client-go's DeletedFinalStateUnknown): ``old``
    # is the last version seen, not the object's final state.
    final_state_unknown: bool = False


Delta = Added[T] | Updated[T] | Deleted[T]
