"""Just enough of a Dockerfile reader to check ours and to replay its builder stage without
Docker, and the .dockerignore filter that decides what the build context holds.

Covers what the project's Dockerfile uses: parser-directive and comment lines, line
continuations, global ``ARG``s with defaults, ``FROM image [AS name]``, ``ENV k=v ...`` and
``${VAR}`` substitution. Anything fancier (heredocs, ``ONBUILD``) is out of scope: the tests
fail on instructions they do not know rather than guess.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Dockerfile", "Instruction", "Stage", "context_files", "ignore_patterns"]


@dataclass(frozen=True, slots=True)
class Instruction:
    keyword: str  # upper case: RUN, COPY, ...
    args: str  # the rest of the logical line, continuations joined
    line: int  # where it starts (1-based)

    def words(self) -> list[str]:
        return shlex.split(self.args)


@dataclass(slots=True)
class Stage:
    base: str  # as written (``${BASE_IMAGE}``)
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for ins in self.all("ENV"):
            out.update(parse_env(ins.args))
        return out


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not buf):
            continue  # comments (also inside continuations, as Docker does) and blank lines
        if not buf:
            start = number
        if raw.rstrip().endswith("\\"):
            buf.append(raw.rstrip()[:-1])
            continue
        buf.append(raw)
        yield start, "".join(buf).strip()
        buf = []
    if buf:
        yield start, "".join(buf).strip()


def parse_env(args: str) -> dict[str, str]:
    """``ENV a=1 b="two words"`` (the key=value form only)."""
    out: dict[str, str] = {}
    for word in shlex.split(args):
        key, sep, value = word.partition("=")
        if not sep:
            raise ValueError(f"ENV {args!r}: only the key=value form is supported")
        out[key] = value
    return out


def substitute(text: str, values: Mapping[str, str]) -> str:
    """``$VAR`` and ``${VAR}`` from values; unknown variables are left as they are."""

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return values.get(name, m.group(0))

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, text)


class Dockerfile:
    def __init__(self, text: str) -> None:
        self.global_args: dict[str, str] = {}
        self.stages: list[Stage] = []
        for line, logical in _logical_lines(text):
            keyword, _, rest = logical.partition(" ")
            keyword, rest = keyword.upper(), rest.strip()
            if keyword == "FROM":
                words = rest.split()
                name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
                self.stages.append(Stage(base=words[0], name=name))
            elif not self.stages:
                if keyword != "ARG":
                    raise ValueError(f"line {line}: only ARG may come before the first FROM")
                key, _, default = rest.partition("=")
                self.global_args[key] = default
            else:
                self.stages[-1].instructions.append(Instruction(keyword, rest, line))

    @classmethod
    def read(cls, path: Path) -> Dockerfile:
        return cls(path.read_text())

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"no stage named {name!r}")

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def base_image(self, stage: Stage) -> str:
        return substitute(stage.base, self.global_args)


# -------------------------------------------------------------------------------- .dockerignore


def ignore_patterns(path: Path) -> list[tuple[bool, re.Pattern[str], str]]:
    """(negated, regex, pattern) per line, in order: the last matching pattern decides."""
    out = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        out.append((negated, re.compile(_translate(pattern)), pattern))
    return out


def _translate(pattern: str) -> str:
    """Go filepath.Match plus ``**`` (any number of directories), as Docker matches."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out, i = out + pattern[i : end + 1].replace("[!", "[^"), end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return out + r"\Z"


def _excluded(rel: str, patterns: list[tuple[bool, re.Pattern[str], str]]) -> bool:
    parts = rel.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]  # itself or a parent
    excluded = False
    for negated, regex, _ in patterns:
        if any(regex.match(c) for c in candidates):
            excluded = not negated
    return excluded


def context_files(root: Path, dockerignore: Path) -> list[str]:
    """The files ``docker build root`` sends (relative, sorted), .dockerignore applied."""
    patterns = ignore_patterns(dockerignore)
    negations = [p for negated, _, p in patterns if negated]
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath).relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        keep = []
        for d in dirnames:
            rel = prefix + d
            # Descend only where something may be included again below.
            may_reinclude = any(n == rel or n.startswith(rel + "/") or "*" in n for n in negations)
            if not _excluded(rel, patterns) or may_reinclude:
                keep.append(d)
        dirnames[:] = keep
        out.extend(prefix + f for f in filenames if not _excluded(prefix + f, patterns))
    return sorted(out)
