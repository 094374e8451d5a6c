"""The repository's scripts as modules: hack/ and benchmarks/ are folders, not packages."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[1]


def load_script(relpath: str) -> ModuleType:
    """The script at ``relpath`` (from the repository's root, e.g. ``hack/localcluster.py``)
    as the module named after its file. Loaded once per process: later calls, from any test
    module, get the same module object (its globals are shared)."""
    name = Path(relpath).stem
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    path = REPO_ROOT / relpath
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
