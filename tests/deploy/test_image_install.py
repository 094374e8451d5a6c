"""The container image without Docker: the Dockerfile's shape, and its builder stage replayed
for real.

``test_builder_stage_replayed_installs_a_working_py_scheduler`` runs every instruction of the
``builder`` stage as Docker would (ENV, WORKDIR, COPY from the .dockerignore-filtered context,
RUN through ``/bin/sh -c``, verbatim) with the image's filesystem rooted in a temp dir, then
runs ``<venv>/bin/py-scheduler version``. It needs PyPI (or the index pip is configured for);
the one deliberate difference from the image build is that pip may use its local cache here
(``PIP_NO_CACHE_DIR`` is dropped), which changes what is downloaded, not what is installed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy.dockerfile import Dockerfile, context_files, parse_env, substitute

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
LOCK = REPO / "requirements.lock"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]


def _lock_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in LOCK.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"requirements.lock: {line!r} is not pinned with =="
        pins[canonicalize_name(name)] = version
    return pins


# ------------------------------------------------------------------------------ static checks


def test_lock_pins_every_dependency_within_pyproject_ranges() -> None:
    pins = _lock_pins()
    for spec in PYPROJECT["project"]["dependencies"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} (pyproject.toml) is missing from requirements.lock"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock pins {req.name}=={pins[name]}, outside pyproject's {req.specifier}"
        )
    assert "py-scheduler" not in pins


def test_final_stage_is_the_venv_alone_as_non_root_with_the_run_entrypoint() -> None:
    df = Dockerfile.read(DOCKERFILE)
    builder, final = df.stage("builder"), df.final
    assert final is not builder
    assert df.base_image(builder) == df.base_image(final) == "python:3.11-slim"
    venv = builder.env()["VIRTUAL_ENV"]
    # Only the venv, to the same path (a venv is not relocatable); no RUN: no tool is added.
    copies = [i.words() for i in final.all("COPY")]
    assert copies == [["--from=builder", venv, venv]], copies
    assert final.all("RUN") == []
    assert {i.keyword for i in final.instructions} <= {
        "ARG",
        "LABEL",
        "COPY",
        "ENV",
        "USER",
        "EXPOSE",
        "ENTRYPOINT",
    }
    (user,) = final.all("USER")
    uid, _, gid = user.args.partition(":")
    assert uid == "10001" and gid == "10001", "a numeric non-root user (runAsNonRoot checks it)"
    (entrypoint,) = final.all("ENTRYPOINT")
    assert json.loads(entrypoint.args) == ["py-scheduler", "run"]
    (expose,) = final.all("EXPOSE")
    assert expose.args == "10260"
    assert final.env()["PATH"].startswith(f"{venv}/bin:")
    args = {}
    for ins in final.all("ARG"):
        key, _, default = ins.args.partition("=")
        args[key] = default or df.global_args.get(key, "")
    assert args["VERSION"] == VERSION, "keep the Dockerfile's VERSION default = pyproject's"
    labels = {
        k: substitute(v, args) for ins in final.all("LABEL") for k, v in parse_env(ins.args).items()
    }
    for key in ("title", "description", "version", "revision", "licenses", "base.name"):
        assert labels.get(f"org.opencontainers.image.{key}"), f"OCI label {key} missing"
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.base.name"] == "python:3.11-slim"


def test_build_context_holds_only_the_package_and_its_metadata() -> None:
    files = context_files(REPO, REPO / ".dockerignore")
    assert "pyproject.toml" in files and "requirements.lock" in files
    assert "scheduler/cli.py" in files and "scheduler/kube/client.py" in files
    outside = [f for f in files if f.split("/")[0] not in ("scheduler", "pyproject.toml")]
    assert set(outside) <= {"README.md", "requirements.lock"}, outside
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]


# ------------------------------------------------------------------------------ the replay


def _reroot(value: str, image_root: Path) -> str:
    return str(image_root / value.lstrip("/")) if value.startswith("/") else value


def _replay_env(tmp_path: Path) -> dict[str, str]:
    """What a RUN sees: PATH with ``python`` = this interpreter (3.11, as the base image),
    HOME for pip's cache, and the host's pip/proxy/CA settings so that the index is reachable."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "python").symlink_to(sys.executable)
    env = {
        "PATH": f"{shim}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "LANG": "C.UTF-8",
    }
    for key, value in os.environ.items():
        if (
            key.startswith("PIP_")
            or key.lower().endswith("_proxy")
            or key
            in (
                "SSL_CERT_FILE",
                "REQUESTS_CA_BUNDLE",
            )
        ):
            env[key] = value
    return env


def test_builder_stage_replayed_installs_a_working_py_scheduler(tmp_path: Path) -> None:
    builder = Dockerfile.read(DOCKERFILE).stage("builder")
    context = tmp_path / "context"
    for rel in context_files(REPO, REPO / ".dockerignore"):
        (context / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, context / rel)
    image_root = tmp_path / "image"
    workdir = image_root
    workdir.mkdir()
    env = _replay_env(tmp_path)
    ran = []
    for ins in builder.instructions:
        if ins.keyword == "ENV":
            env.update({k: _reroot(v, image_root) for k, v in parse_env(ins.args).items()})
        elif ins.keyword == "ARG":
            assert "=" not in ins.args, f"line {ins.line}: a builder ARG is set by the caller"
        elif ins.keyword == "WORKDIR":
            workdir = Path(_reroot(ins.args, image_root))
            workdir.mkdir(parents=True, exist_ok=True)
        elif ins.keyword == "COPY":
            *sources, dest = ins.words()
            assert not any(s.startswith("--") for s in sources), f"line {ins.line}: flags"
            target = Path(_reroot(dest, image_root)) if dest.startswith("/") else workdir / dest
            for src in sources:
                path = context / src
                assert path.exists(), f"line {ins.line}: {src} is not in the build context"
                if path.is_dir():
                    shutil.copytree(path, target, dirs_exist_ok=True)
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target / path.name)
        elif ins.keyword == "RUN":
            absolute = [w for w in shlex.split(ins.args) if w.startswith("/")]
            assert not absolute, f"line {ins.line}: absolute paths cannot be replayed: {absolute}"
            proc = subprocess.run(
                ["/bin/sh", "-c", ins.args],
                cwd=workdir,
                env={k: v for k, v in env.items() if k != "PIP_NO_CACHE_DIR"},
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert proc.returncode == 0, (
                f"Dockerfile line {ins.line} failed ({proc.returncode}): RUN {ins.args}\n"
                f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
            ran.append(ins.line)
        else:
            pytest.fail(f"line {ins.line}: the replay does not know {ins.keyword}; teach it")
    assert len(ran) >= 3, "venv, dependencies, package"

    venv = Path(env["VIRTUAL_ENV"])
    assert venv.is_relative_to(image_root)
    out = subprocess.run(
        [str(venv / "bin" / "py-scheduler"), "version"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"py-scheduler {VERSION}\n"

    # The venv holds exactly the locked dependencies and py-scheduler, not as an editable
    # install of the repo; pip and setuptools are gone (nothing to install with at run time).
    probe = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m, json, scheduler; "
            "print(json.dumps({'dists': {d.metadata['Name']: d.version "
            "for d in m.distributions()}, 'file': scheduler.__file__}))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert probe.returncode == 0, probe.stderr
    facts = json.loads(probe.stdout)
    dists = {canonicalize_name(k): v for k, v in facts["dists"].items()}
    assert dists.pop("py-scheduler") == VERSION
    assert dists == _lock_pins()
    assert Path(facts["file"]).is_relative_to(venv), facts["file"]
    assert not (venv / "bin" / "pip").exists()
