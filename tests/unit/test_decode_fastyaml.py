"""The YAML fast path (rapidyaml's JSON emitter read by orjson) against the loader it stands
in for: on every input it either builds exactly what ``_YAML_LOADER`` builds (same types all
the way down, same key order, the same number of documents) or declines (None), and then the
loader builds or raises as before. Hand-written documents name the forms; Hypothesis
generates lines in and around the subset, and random objects through PyYAML's dumper."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import decode
from scheduler.decode import InputError, fast_yaml_documents, load_documents
from tests.builders import make_node, make_pod

pytest.importorskip("ryml")

SETTINGS = settings(
    max_examples=int(os.environ.get("FASTYAML_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _canon(x: Any) -> Any:
    """A value that differs whenever the types, the key order or a float's sign differ."""
    if isinstance(x, dict):
        return ("dict", [(_canon(k), _canon(v)) for k, v in x.items()])
    if isinstance(x, list):
        return ("list", [_canon(v) for v in x])
    if isinstance(x, float) and math.isnan(x):
        return ("float", "nan")
    return (type(x).__name__, repr(x))


def _reference(text: str) -> list[Any] | Exception:
    try:
        return list(yaml.load_all(text, Loader=decode._YAML_LOADER))
    except yaml.YAMLError as e:
        return e


def _check(text: str) -> list[Any] | None:
    """The fast path's documents (or None), after checking them against the loader's."""
    fast = fast_yaml_documents(text, text.encode())
    want = _reference(text)
    if fast is not None:
        assert not isinstance(want, Exception), f"the loader raises {want!r}: must decline"
        assert _canon(fast) == _canon(want)
    return fast


# --------------------------------------------------------------------------- hand-written

_KUBECTL = """\
apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata:
    annotations:
      kubernetes.io/psp: "true"
      note: 'it''s "quoted"'
      port: "8080"
    creationTimestamp: "2026-01-01T00:00:00Z"
    labels:
      app: web
      pod-template-hash: 5d9c
    name: web-5d9c-x1
    namespace: default
    ownerReferences:
    - apiVersion: apps/v1
      blockOwnerDeletion: true
      controller: true
      kind: ReplicaSet
      name: web-5d9c
      uid: 0f1e2d3c-aaaa-bbbb-cccc-000000000001
    resourceVersion: "12345"
  spec:
    containers:
    - args:
      - --port=8080
      - -v
      command:
      - /bin/server
      image: registry.k8s.io/pause:3.10
      name: app
      resources:
        limits:
          cpu: "1"
          memory: 256Mi
        requests:
          cpu: 100m
          memory: 128Mi
      terminationMessagePath: /dev/termination-log
    nodeSelector:
      kubernetes.io/os: linux
    priority: 0
    schedulerName: py-scheduler
    tolerations:
    - effect: NoExecute
      key: node.kubernetes.io/not-ready
      operator: Exists
      tolerationSeconds: 300
  status:
    conditions:
    - lastProbeTime: null
      lastTransitionTime: "2026-01-01T00:00:00Z"
      status: "True"
      type: PodScheduled
    hostIP: 10.0.0.7
    phase: Running
    podIP: 10.244.1.9
    qosClass: Burstable
    startTime: "2026-01-01T00:00:00Z"
kind: List
metadata:
  resourceVersion: ""
"""


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(_KUBECTL, id="kubectl get pods -o yaml"),
        pytest.param(yaml.safe_dump_all([make_node("n1").obj(), make_pod("a").obj()]), id="dump"),
        pytest.param(
            "a: 1\nb: -7\nc: 0\nd: -0\ne: 1.5\nf: -0.0\ng: 123456789012345678\n", id="ints"
        ),
        pytest.param("a: true\nb: false\nc: null\nd:\ne: {}\nf: []\n", id="bool null empty"),
        pytest.param("a: 100m\nb: 128Mi\nc: 5d9c\nd: 10.0.0.1\ne: 1.2.3-rc1\n", id="digits first"),
        pytest.param("a: x y z\nb: http://h:80/p\nc: a:b\nd: -a\ne: --x=1\n", id="plain strings"),
        pytest.param("a: Yesterday\nb: nothing\nc: 'yes'\nd: \"no\"\n", id="words near bools"),
        pytest.param("'a b': 1\n\"c\\td\": 2\n_k: 3\n/p: 4\n", id="quoted and odd keys"),
        pytest.param(
            'a: "\\\\ \\" \\/ \\n \\t \\r \\b \\f \\x41 \\u00e9 \\u4e2d"\nb: \'x \\n\'\n',
            id="double-quoted escapes",
        ),
        pytest.param("a: xé\nb: 'ü ß'\nc: \"日本\"\nd: x😀 y\n", id="unicode"),
        pytest.param("# head\na: 1\n  # indented comment\n\nb: 2\n# tail\n", id="comments"),
        pytest.param("- 1\n-\n- - a\n  - b\n- c: 1\n  d: 2\n- []\n", id="sequences"),
        pytest.param("a:\n- 1\n- 2\nb:\n  - 3\n", id="sequences under keys"),
        pytest.param("a: 1\na: 2\nb: 3\na: 4\n", id="duplicate keys, the last wins in place"),
        pytest.param("", id="nothing"),
        pytest.param("# only a comment\n\n", id="only comments"),
        pytest.param("---\n", id="one empty document"),
        pytest.param("---\n---\na: 1\n---\n", id="empty documents around"),
        pytest.param("a: 1\n---\n\n# c\n---\nb: 2", id="no final newline"),
        pytest.param("# c\n---\na: 1\n", id="comment then ---"),
        pytest.param(
            "metadata:\n  annotations:\n    kubectl.kubernetes.io/last-applied-configuration: |\n"
            '      {"apiVersion":"v1","kind":"PriorityClass","value":-5,"a":"b: c"}\n'
            "  name: x\nvalue: 1000\n",
            id="kubectl's last-applied-configuration (a literal block)",
        ),
        pytest.param("a: |\n  x\n  y\n", id="literal block"),
        pytest.param("a: |-\n  x\n\n    y # z\n  =: w\n\n\nb: 1\n", id="literal, strip"),
        pytest.param("- a: |\n    x\n  b: |\n     y\n---\nc: |\n  ---\n", id="blocks in entries"),
    ],
)
def test_the_fast_path_takes_these_and_builds_what_the_loader_builds(text: str) -> None:
    assert _check(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        # Scalars YAML 1.1 types where rapidyaml (or JSON) would not, or not alike.
        pytest.param("a: yes\n", id="yes"),
        pytest.param("a: No\n", id="No"),
        pytest.param("a: on\n", id="on"),
        pytest.param("a: True\n", id="True"),
        pytest.param("a: y\n", id="y"),
        pytest.param("a: ~\n", id="tilde"),
        pytest.param("a: NULL\n", id="NULL"),
        pytest.param("a: 0777\n", id="octal"),
        pytest.param("a: 0x1F\n", id="hex"),
        pytest.param("a: 0b101\n", id="binary"),
        pytest.param("a: 1_000\n", id="underscores"),
        pytest.param("a: 1:30\n", id="sexagesimal"),
        pytest.param("a: +1\n", id="plus"),
        pytest.param("a: 1e3\n", id="exponent without a dot: a string in YAML 1.1"),
        pytest.param("a: 1.5e+3\n", id="exponent"),
        pytest.param("a: 1.\n", id="trailing dot"),
        pytest.param("a: .5\n", id="leading dot"),
        pytest.param("a: .inf\n", id=".inf"),
        pytest.param("a: -.inf\n", id="-.inf"),
        pytest.param("a: .nan\n", id=".nan"),
        pytest.param("a: nan\n", id="nan: rapidyaml writes .nan"),
        pytest.param("a: inf\n", id="inf"),
        pytest.param("a: -Infinity\n", id="-Infinity"),
        pytest.param("a: 1234567890123456789\n", id="past 18 digits"),
        pytest.param("a: 2001-12-14\n", id="date"),
        pytest.param("a: 2001-12-14t21:59:43.10-05:00\n", id="timestamp"),
        pytest.param("a: 2001-12-14 21:59:43.10 -5\n", id="spaced timestamp"),
        pytest.param("1: a\n", id="int key"),
        pytest.param("true: a\n", id="bool key"),
        pytest.param("null: a\n", id="null key"),
        pytest.param("nan: a\n", id="nan key"),
        pytest.param("<<: {a: 1}\n", id="merge key"),
        pytest.param("=: a\n", id="value key"),
        # Structure and styles outside the subset.
        pytest.param("a: &x 1\nb: *x\n", id="anchor and alias"),
        pytest.param("a: !!str 1\n", id="tag"),
        pytest.param("a: !!binary aGVsbG8=\n", id="binary"),
        pytest.param("a: !custom x\n", id="custom tag"),
        pytest.param("a: >-\n  x\n  y\n", id="folded block"),
        pytest.param("a: |+\n  x\n\n", id="keep chomping"),
        pytest.param("a: |2\n   x\n", id="indentation indicator"),
        pytest.param("- |\n  x\n", id="a block as an entry"),
        pytest.param("a: |\n\n  x\n", id="a block's leading empty line"),
        pytest.param("a: |\n  x\n   \n", id="a block's line of spaces"),
        pytest.param("a: |\n  x\n\ty\n", id="a tab in a block"),
        pytest.param("a: |\n  x", id="a block's last line without a line break"),
        pytest.param("a: |\nb: 1\n", id="an empty block"),
        pytest.param("a: b\n  c\n", id="multi-line plain"),
        pytest.param('a: "b\n  c"\n', id="multi-line double-quoted"),
        pytest.param("a: [1, 2]\n", id="flow sequence"),
        pytest.param("a: {b: 1}\n", id="flow mapping"),
        pytest.param("{a: 1}\n", id="flow document"),
        pytest.param("? a\n: 1\n", id="explicit key"),
        pytest.param("%YAML 1.1\n---\na: 1\n", id="directive"),
        pytest.param("a: 1\n...\n", id="document end"),
        pytest.param("--- a: 1\n", id="content after ---"),
        pytest.param("a: 1 # c\n", id="trailing comment"),
        pytest.param("a: 1  \n", id="trailing spaces"),
        pytest.param("a: é\n", id="a plain string starting with a non-ASCII letter"),
        pytest.param("a:\tb\n", id="tab"),
        pytest.param("a: 1\r\nb: 2\r\n", id="CRLF"),
        pytest.param("\ufeffa: 1\n", id="BOM"),
        pytest.param("a: x\u2028y\n", id="line separator"),
        pytest.param("a: x\x85y\n", id="next line"),
        pytest.param('a: "\\ud800"\n', id="surrogate escape"),
        pytest.param('a: "\\N\\_\\L\\P\\e\\0"\n', id="YAML-only escapes"),
        pytest.param("plain\n", id="a scalar document"),
        pytest.param("a: x, y\n", id="comma"),
        pytest.param("- a\n  - b\n", id="a plain scalar continued by a dash line"),
        pytest.param("a: 1\n  - 2\n", id="a key's int continued: the string '1 - 2'"),
        pytest.param("- a\n\n  - b\n", id="continued after an empty line"),
        pytest.param("- x\n  -\n", id="continued by a bare dash"),
        pytest.param("a: 'x - y'\n", id="a quoted string that looks folded (only costs speed)"),
        pytest.param("a: |\n  x\n  - y\n", id="a block that looks folded (only costs speed)"),
        pytest.param("k" * 1100 + ": 1\n", id="a key past libyaml's 1024 characters"),
        pytest.param("'" + "k" * 1100 + "': 1\n", id="a quoted key past 1024 characters"),
        pytest.param("- " * 70 + "a\n", id="deeper than rapidyaml's emitter goes"),
    ],
)
def test_the_fast_path_declines_these(text: str) -> None:
    assert _check(text) is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a:\n  b: 1\n c: 2\n", id="dedent to no level"),
        pytest.param("a: 1\n  b: 2\n", id="key under a scalar"),
        pytest.param("- a\nb: 1\n", id="map after a sequence"),
        pytest.param("a:\n  - 1\n - 2\n", id="sequence dedent"),
        pytest.param("- a: 1\n b: 2\n", id="entry key dedent"),
        pytest.param("  a: 1\nb: 2\n", id="root dedent"),
    ],
)
def test_invalid_yaml_in_the_subset_goes_to_the_loader(text: str, capfd: Any) -> None:
    """rapidyaml rejects it too: the loader's error is the one shown, and rapidyaml's
    message (written to file descriptor 2) is not."""
    assert isinstance(_reference(text), yaml.YAMLError)
    assert _check(text) is None
    assert capfd.readouterr().err == ""


def test_documents_keep_their_numbers_and_errors_name_them(tmp_path: Path) -> None:
    p = tmp_path / "dump.yaml"
    pods = [make_pod(n).obj() for n in ("a", "b")]
    p.write_text("---\n" + yaml.safe_dump(pods[0]) + "---\n---\n" + yaml.safe_dump(pods[1]))
    assert fast_yaml_documents(p.read_text(), p.read_bytes()) is not None
    assert [d.where for d in load_documents([str(p)])] == [
        f"{p}: document 1",
        f"{p}: document 3",
    ]
    p.write_text(yaml.safe_dump(pods[0]) + "---\n---\nkind: 7\n")
    with pytest.raises(InputError, match=r"document 3: kind: expected a string"):
        load_documents([str(p)])


def test_without_rapidyaml_yaml_takes_the_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "dump.yaml"
    objs = [make_node("n1").obj(), make_pod("a").obj()]
    p.write_text(yaml.safe_dump_all(objs))
    with_ryml = [d.obj for d in load_documents([str(p)])]
    monkeypatch.setattr(decode, "_ryml", False)
    assert fast_yaml_documents(p.read_text(), p.read_bytes()) is None
    assert [d.obj for d in load_documents([str(p)])] == with_ryml == objs


def test_an_absent_rapidyaml_is_imported_once_and_yaml_takes_the_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ryml", None)  # import ryml raises ImportError
    monkeypatch.setattr(decode, "_ryml", None)
    p = tmp_path / "dump.yaml"
    p.write_text(yaml.safe_dump_all([make_node("n1").obj(), make_pod("a").obj()]))
    assert [d.kind for d in load_documents([str(p)])] == ["Node", "Pod"]
    assert decode._ryml is False


def test_a_json_list_and_its_yaml_dump_give_the_same_objects(tmp_path: Path) -> None:
    objs = [make_node("n1").obj(), make_pod("a").node("n1").obj(), make_pod("b").obj()]
    (tmp_path / "d.json").write_text(json.dumps({"kind": "List", "items": objs}))
    (tmp_path / "d.yaml").write_text(
        yaml.safe_dump({"kind": "List", "items": objs}, sort_keys=False)
    )
    text = (tmp_path / "d.yaml").read_text()
    assert fast_yaml_documents(text, text.encode()) is not None
    j = load_documents([str(tmp_path / "d.json")])
    y = load_documents([str(tmp_path / "d.yaml")])
    assert [_canon(d.obj) for d in j] == [_canon(d.obj) for d in y]


# --------------------------------------------------------------------------- Hypothesis


def _words(line: str) -> list[str]:
    return line.split()


# Scalars as they may appear in the text: every YAML 1.1 form above and near-misses.
_TOKENS = [
    *_words("yes Yes YES no No NO on On ON off Off OFF y Y n N true True TRUE false False FALSE"),
    *_words("null Null NULL ~ nan NaN .nan inf Inf .inf -.inf +.inf infinity -Infinity"),
    *_words("0 -0 00 01 0777 0o17 0x1F 0b101 1_000 1:30 1:30.5 190:20:30 -1 +1 7 42"),
    *_words("1.5 -1.5 0.0 -0.0 1. .5 -.5 1e3 1E3 1.5e+3 1.5e3 1.5E-3 1e 12e 0e1 3.14159"),
    *_words("2001-12-14 2001-12-14t21:59:43.10-05:00 2002-12-14T00:00:00Z 2026-1-1"),
    *_words("100m 128Mi 1Gi 5d9c 1d 1f 1l 1u 2h 30s 10.0.0.1 1.2.3 1.2.3e5 0.5.1"),
    *_words("a b_c /bin/sh -a --x=1 -inf -nan a:b http://h:80/p a-b x.y/z _ @a `a %a ---x"),
    *_words("<< = & &a *a ! !!str !t | |- > >+ ? ?a [] {} [a] - -- --- ... # #a"),
    "{a: 1}",
    *["'q'", "'it''s'", '"d"', '"a\\nb"', '"\\u00e9"', '"\\x41"', '"\\/"', '"\\ud800"'],
    *['"\\N"', '"\\0"', '"\\e"', "é", "日本", "x😀", "x\u2028y", "a b", "a  b", "''", '""'],
    *["-- x", "x -", "'\u00a0'", '"\\x85"', '"\\u2028"', "'\ufffe'", "a" * 1030],
]
# The forms the fast path takes (most documents should hold only these, or it is rarely run).
_IN_SUBSET = [
    *_words("true false null 0 -0 -1 7 42 1.5 -1.5 0.0 -0.0 3.14159 100m 128Mi 1Gi 5d9c 1d 1f"),
    *_words("2h 30s 10.0.0.1 1.2.3 1.2.3e5 a b_c /bin/sh -a --x=1 a:b http://h:80/p x.y/z _ [] {}"),
    *["'q'", "'it''s'", '"d"', '"a\\nb"', '"\\u00e9"', '"\\x41"', '"\\/"', "x😀", "a b", "''"],
    *['""', "Yesterday", "nothing", "nulls", "truth", "offset", "information", "123456789"],
]
_KEYS = [*_TOKENS[:40], "a", "b", "kind", "metadata", "app.kubernetes.io/name", "'k'", '"k"']
_KEYS += ['"<<"', "''", "k" * 1030, "'" + "k" * 1030 + "'"]
_IN_SUBSET_KEYS = ["a", "b", "kind", "metadata", "app.kubernetes.io/name", "'k'", '"k"', "on_"]
_SCALAR = st.one_of(*[st.sampled_from(_IN_SUBSET)] * 4, st.sampled_from(_TOKENS))
_KEY = st.one_of(*[st.sampled_from(_IN_SUBSET_KEYS)] * 4, st.sampled_from(_KEYS))


@st.composite
def _lines(draw: st.DrawFn) -> str:
    out = []
    for _ in range(draw(st.integers(1, 12))):
        indent = " " * draw(st.sampled_from([0, 0, 0, 1, 2, 2, 4]))
        dashes = "- " * draw(st.sampled_from([0, 0, 0, 1, 1, 2]))
        shape = draw(st.sampled_from(["kv", "kv", "kv", "k", "v", "dash", "doc", "c", ""]))
        if shape == "doc":
            out.append("---")
        elif shape == "c":
            out.append(indent + "# " + draw(_SCALAR))
        elif shape == "":
            out.append("")
        elif shape == "dash":
            out.append(indent + dashes + "-")
        elif shape == "v":
            out.append(indent + "- " + dashes + draw(_SCALAR))
        else:
            key = draw(_KEY)
            value = "" if shape == "k" else " " + draw(_SCALAR)
            out.append(indent + dashes + key + ":" + value)
    end = draw(st.sampled_from(["\n", ""]))
    return "\n".join(out) + end


@SETTINGS
@given(_lines())
def test_lines_in_and_around_the_subset(text: str) -> None:
    _check(text)


# Raw tokens (written as they are, not quoted by a dumper) in well-formed block structure.
def _raw(scalar: st.SearchStrategy[str], key: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalar,
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=3),
            st.lists(st.tuples(key, inner), min_size=1, max_size=3),
        ),
        max_leaves=6,
    )


def _block(node: Any, indent: int, out: list[str], lead: str) -> None:
    """Block style as kubectl writes it; ``lead`` goes before the node's first line (a key
    and its colon, or ``- ``)."""
    pad = " " * indent
    if isinstance(node, str):
        out.append(f"{lead} {node}" if lead.endswith(":") else f"{lead}{node}")
    elif node and isinstance(node[0], tuple):  # a mapping
        for i, (key, value) in enumerate(node):
            head = (lead if i == 0 else pad) + f"{key}:"
            if isinstance(value, str):
                _block(value, indent, out, head)
            else:
                out.append(head)
                _block(value, indent + 2, out, " " * (indent + 2))
    else:
        for i, item in enumerate(node):
            head = (lead if i == 0 else pad) + "- "
            if isinstance(item, list) and item and isinstance(item[0], tuple):
                _block(item, indent + 2, out, head)
            elif isinstance(item, list):
                out.append(head.rstrip())
                _block(item, indent + 2, out, " " * (indent + 2))
            else:
                _block(item, indent, out, head)


def _stream(docs: list[Any]) -> str:
    out: list[str] = []
    for doc in docs:
        out.append("---")
        _block(doc, 0, out, "")
    return "\n".join(out) + "\n"


_IN_DOCS = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(_IN_SUBSET_KEYS),
            _raw(st.sampled_from(_IN_SUBSET), st.sampled_from(_IN_SUBSET_KEYS)),
        ),
        min_size=1,
        max_size=3,
    ),
    max_size=3,
)


@SETTINGS
@given(_IN_DOCS)
def test_well_formed_documents_of_the_subset_take_the_fast_path(docs: list[Any]) -> None:
    assert _check(_stream(docs)) is not None


@SETTINGS
@given(st.lists(st.lists(st.tuples(_KEY, _raw(_SCALAR, _KEY)), min_size=1, max_size=3), max_size=3))
def test_raw_scalars_in_block_documents(docs: list[Any]) -> None:
    _check(_stream(docs))


_BLOCK_TEXT = st.one_of(
    *[st.sampled_from([*_IN_SUBSET, '{"k":"v","n":-1}', "x: y", "# c", "x  ", "日本"])] * 3,
    st.sampled_from([*_TOKENS, "- z", " ", "\t", "x\ty"]),
)
_BLOCK_LINES = st.lists(
    st.one_of(
        st.just(""),
        *[st.tuples(st.sampled_from([0, 0, 0, 2, 5]), _BLOCK_TEXT).map(lambda t: " " * t[0] + t[1])]
        * 4,
    ),
    min_size=1,
    max_size=5,
)


@SETTINGS
@given(
    st.sampled_from(["", "- ", "  ", "- - "]),
    st.sampled_from(["|", "|-", "|", "|-", "|+", ">", "|2", "| "]),
    st.integers(1, 4),
    _BLOCK_LINES,
    st.sampled_from(["", "b: 1\n", "  b: 1\n", "---\n", "# c\n", "- b\n"]),
    st.booleans(),
)
def test_literal_blocks(
    lead: str, header: str, indent: int, lines: list[str], after: str, last_break: bool
) -> None:
    pad = " " * (len(lead) + indent)
    body = "\n".join(pad + line if line else line for line in lines)
    _check(f"{lead}a: {header}\n{body}" + ("\n" if last_break else "") + after)


@SETTINGS
@given(st.lists(st.from_regex(r"[ -~é日]{1,30}", fullmatch=True), min_size=1, max_size=4))
def test_pyyaml_dumps_of_multi_line_strings(lines: list[str]) -> None:
    """Strings with line breaks, as a dumper writes them (literal when it can)."""
    value = "\n".join(lines)

    class Literal(yaml.SafeDumper):
        pass

    Literal.add_representer(
        str, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v, style="|")
    )
    for v in (value, value + "\n"):
        _check(yaml.dump({"a": v, "b": [v]}, Dumper=Literal, allow_unicode=True))
        _check(yaml.safe_dump({"a": v}, allow_unicode=True))


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.sampled_from(_TOKENS),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
    st.from_regex(r"[0-9][0-9a-zA-Z.:_+-]{0,8}", fullmatch=True),
)
_OBJECTS = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=6), st.sampled_from(_KEYS)), inner, max_size=4),
    ),
    max_leaves=20,
)


@SETTINGS
@given(st.lists(_OBJECTS, max_size=3), st.booleans(), st.sampled_from([20, 80, 1000]))
def test_pyyaml_dumps_of_random_objects(objs: list[Any], unicode: bool, width: int) -> None:
    text = yaml.safe_dump_all(objs, allow_unicode=unicode, width=width)
    _check(text)


_RESERVED = {"y", "n", "yes", "no", "on", "off", "nan", "inf", "infinity", "true", "false", "null"}
_K8S_WORDS = st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True).filter(
    lambda w: w not in _RESERVED  # plain in a dump, declined by the fast path (a string)
)
_K8S_SCALARS = st.one_of(
    _K8S_WORDS,
    # No leading zero: the dumper writes 08 plain (not octal, so a string) and the fast path
    # declines digits without a letter unless they are a canonical number.
    st.from_regex(r"[1-9][0-9]{0,3}(m|Mi|Gi|Ki)?", fullmatch=True),
    st.integers(-(10**12), 10**12),
    st.booleans(),
    st.none(),
    # Strings YAML 1.1 would retype: the dumper quotes them. (It writes the string 1e3
    # plain, a string for YAML 1.1 but a number for rapidyaml: that dump is declined.)
    st.sampled_from(["2026-01-01T00:00:00Z", "10.0.0.1", "True", "yes", "0777", "1.5", "~"]),
)


@SETTINGS
@given(
    st.lists(
        st.dictionaries(
            _K8S_WORDS,
            st.one_of(
                _K8S_SCALARS,
                st.dictionaries(_K8S_WORDS, _K8S_SCALARS),
                st.lists(_K8S_SCALARS, max_size=3),
                st.builds(dict),  # a new one each time: a shared one becomes an alias
                st.builds(list),
            ),
            min_size=1,
        ),
        min_size=1,
        max_size=3,
    )
)
def test_dumps_shaped_like_kubectl_s_take_the_fast_path(objs: list[dict[str, Any]]) -> None:
    """Objects of API shapes, dumped: always in the subset, and equal to the loader's."""
    text = yaml.safe_dump_all(objs, width=10**6)
    assert _check(text) is not None


@SETTINGS
@given(
    st.lists(
        st.one_of(
            st.floats(allow_nan=False, allow_infinity=False).map(repr),
            st.tuples(st.integers(-(10**17), 10**17), st.integers(0, 10**17 - 1)).map(
                lambda t: f"{t[0]}.{t[1]}"
            ),
            st.integers(-(10**18) + 1, 10**18 - 1).map(str),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_numbers_round_alike(numbers: list[str]) -> None:
    """orjson and PyYAML (``float()``, ``int()``) read the decimals of the subset alike."""
    _check("".join(f"k{i}: {n}\n" for i, n in enumerate(numbers)))
