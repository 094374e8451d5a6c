"""The scheduler's cache of nodes and placed pods, and the per-cycle Snapshot."""

from scheduler.backend.cache.cache import Cache, CacheError
from scheduler.backend.cache.snapshot import Snapshot

__all__ = ["Cache", "CacheError", "Snapshot"]
