"""Raw API objects -> typed records: the one decoder of ``run``, ``simulate`` and ``explain``.

What it owns:

- ``loads_json``: JSON text to Python objects (orjson: several times faster than json). The
  live layer decodes watch lines and replies with it; the file loader below does too.
- ``ObjectDecoder``: one method per kind the scheduler reads (pods, nodes, PDBs,
  PriorityClasses, namespaces). It keeps the PriorityClasses seen so far (a pod's priority
  comes from its class), checks the shape of the fields the parsers take for granted so that
  a wrong type names its field, and turns any failure into a ``ParseError`` that names the
  object and the field. The informers of the live layer call it once per object version;
  ``simulate`` and ``explain`` call it for every object of a dump or a listing.
- ``load_documents``: files, directories or standard input holding ``kubectl get -o json``
  Lists (or any JSON objects) and multi-document YAML (rapidyaml and orjson for files in a
  subset where they read as the safe loader does, see ``fast_yaml_documents``; otherwise
  PyYAML's safe loader, with libyaml's parser when PyYAML has it),
  as ``Document`` records that know their file, document number and List item, with
  ``InputError`` naming those for bad input. An optional progress callback counts objects.

What it does not own: what the records mean (the core), and the wire (``scheduler.kube``).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scheduler.draapi import (
    DeviceClassInfo,
    DeviceTaintRuleInfo,
    ResourceClaimInfo,
    ResourceSliceInfo,
    device_class_from_dict,
    device_taint_rule_from_dict,
    resource_claim_from_dict,
    resource_slice_from_dict,
)
from scheduler.types import (
    CSIDriverInfo,
    CSINodeInfo,
    CSIStorageCapacityInfo,
    NodeRecord,
    ParseError,
    PDBInfo,
    PodInfo,
    PriorityClassInfo,
    PVCInfo,
    PVInfo,
    SelectorObject,
    ServiceInfo,
    StorageClassInfo,
    VolumeAttachmentInfo,
    csi_driver_from_dict,
    csi_node_from_dict,
    csi_storage_capacity_from_dict,
    global_default_class,
    node_from_dict,
    pdb_from_dict,
    pod_from_dict,
    priority_class_from_dict,
    pv_from_dict,
    pvc_from_dict,
    selector_object_from_dict,
    service_from_dict,
    storage_class_from_dict,
    volume_attachment_from_dict,
)

__all__ = [
    "Document",
    "InputError",
    "ObjectDecoder",
    "load_documents",
    "loads_json",
    "loads_without_managed_fields",
]

try:
    import orjson

    def loads_json(data: bytes | str) -> Any:
        """JSON text to Python objects (orjson when installed)."""
        return orjson.loads(data)

except ImportError:  # pragma: no cover - orjson is a dependency; this keeps a broken env usable
    import json

    def loads_json(data: bytes | str) -> Any:
        return json.loads(data)


# metadata.managedFields in the API server's JSON: ManagedFields is the last field of
# ObjectMeta, and Go's encoder writes struct fields in their order, so in a Pod or a Node
# the list is closed by "]", then metadata's "}", then ',"spec":'. Neither marker can occur
# inside a JSON string: its quote after the comma would be escaped.
_MANAGED_FIELDS = b',"managedFields":['
_METADATA_END = b']},"spec":'


def loads_without_managed_fields(data: bytes) -> Any:
    """``loads_json`` of a watch event or a LIST page, without the objects'
    ``metadata.managedFields``.

    Nothing in the scheduler reads them, and they are the larger part of a pod's or a
    node's JSON (a pod bound and started by kwok: 1.6 of 3.8 KB, 55 % of orjson's time;
    kube-scheduler's informers drop them too, after decoding). The bytes of each list are
    cut out before decoding when the cut is certain: both markers found, and the list's own
    brackets the only ones between them (entries hold strings and maps, no lists), so the
    list ends exactly where its metadata does. Otherwise (a field after the list, a bracket
    in a field's name) that object keeps its list: slower, never different."""
    parts: list[bytes] = []
    kept = 0  # data[kept:] is not copied yet
    start = data.find(_MANAGED_FIELDS)
    while start >= 0:
        first = start + len(_MANAGED_FIELDS)  # just after the list's "["
        end = data.find(_METADATA_END, first)
        if end < 0:
            break
        if data.find(b"[", first, end) < 0 and data.find(b"]", first, end) < 0:
            parts.append(data[kept:start])
            kept = end + 1
            start = data.find(_MANAGED_FIELDS, kept)
        else:
            start = data.find(_MANAGED_FIELDS, first)
    if parts:
        parts.append(data[kept:])
        data = b"".join(parts)
    return loads_json(data)


_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it

_TAG = "tag:yaml.org,2002:"
_STR, _MAP, _SEQ = _TAG + "str", _TAG + "map", _TAG + "seq"
_SPECIAL_KEYS = (_TAG + "merge", _TAG + "value")  # keys SafeConstructor.flatten_mapping rewrites
_IN_PROGRESS = object()
_SCALAR, _MAPPING, _SEQUENCE = yaml.ScalarNode, yaml.MappingNode, yaml.SequenceNode


class _Fallback(Exception):
    """A document the fast constructor does not build: SafeConstructor builds it instead."""


class _FastSafeLoader(_SAFE_LOADER):  # type: ignore[misc]
    """PyYAML's safe loader (libyaml's parser when PyYAML has it) with a faster constructor
    for the documents kubectl writes, and the same results.

    PyYAML's constructor spends most of a large dump's time in per-node bookkeeping
    (generators, state, recursion checks). Here a document of plain maps, sequences and the
    safe scalar tags (str, null, bool, int, float, timestamp: each built by
    SafeConstructor's own method) is built in one recursive pass; an alias yields the very
    object built for its anchor, as SafeConstructor does. Anything else (merge keys ``<<``,
    ``=`` keys, other tags such as ``!!set`` or ``!!binary``, unhashable keys, recursive
    aliases, very deep nesting) goes to SafeConstructor unchanged, which builds it or
    raises its own error. Implicit tags of plain scalars are remembered per value: with no
    path resolvers (the safe loader has none) they depend on the value alone."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._tags: dict[str, str] = {}
        if not self.yaml_path_resolvers:
            # The composer calls these two around every node; without path resolvers they
            # do nothing. Builtins that take the same arguments and do nothing either spare
            # two Python calls per node (the profile's next cost after the constructor).
            self.descend_resolver = slice  # (parent, index) -> a throwaway slice
            self.ascend_resolver = tuple  # () -> ()
        self._scalars: dict[str, Callable[[Any], Any]] = {
            _TAG + name: getattr(self, f"construct_yaml_{name}")
            for name in ("null", "bool", "int", "float", "timestamp")
        }

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is _SCALAR and implicit[0] and not self.yaml_path_resolvers:
            tag = self._tags.get(value)
            if tag is None:
                tag = self._tags[value] = super().resolve(kind, value, implicit)
            return tag
        return super().resolve(kind, value, implicit)

    def construct_document(self, node: Any) -> Any:
        try:
            return self._build(node, {})
        except (_Fallback, RecursionError):
            return super().construct_document(node)

    def _build(self, node: Any, built: dict[int, Any]) -> Any:
        cls, tag = node.__class__, node.tag
        if cls is _SCALAR:
            if tag == _STR:
                return node.value
            construct = self._scalars.get(tag)
            if construct is None:
                raise _Fallback
            return construct(node)
        done = built.get(id(node))
        if done is not None:
            if done is _IN_PROGRESS:
                raise _Fallback  # a recursive alias
            return done
        built[id(node)] = _IN_PROGRESS
        out: Any
        if cls is _MAPPING and tag == _MAP:
            out = {}
            for key_node, value_node in node.value:
                # Plain string keys and values (nearly all of a dump) are taken inline.
                if key_node.__class__ is _SCALAR and key_node.tag == _STR:
                    key = key_node.value
                elif key_node.tag in _SPECIAL_KEYS:
                    raise _Fallback
                else:
                    key = self._build(key_node, built)
                    if isinstance(key, (dict, list)):
                        raise _Fallback  # unhashable: SafeConstructor names the error
                if value_node.__class__ is _SCALAR and value_node.tag == _STR:
                    out[key] = value_node.value
                else:
                    out[key] = self._build(value_node, built)
        elif cls is _SEQUENCE and tag == _SEQ:
            out = [self._build(child, built) for child in node.value]
        else:
            raise _Fallback
        built[id(node)] = out
        return out


_YAML_LOADER: Any = _FastSafeLoader
YAML_SUFFIXES = (".yaml", ".yml", ".json")


# ------------------------------------------------------------------------- the YAML fast path

# rapidyaml parses a dump in C++ and its JSON emitter writes it out for orjson: no Python call
# per node, about five times faster than libyaml's events into the loader above. But it reads
# YAML 1.2 and its emitter retypes some plain scalars (``nan`` becomes ".nan", ``1e3`` a
# number, ``yes`` stays a string where the safe loader gives True), and JSON keys are strings.
# So a file takes this path only when every line is in a subset where both read the same:
#
# - document starts ``---`` alone; empty lines; whole-line comments;
# - ``<indent>(- )*key:`` with nothing after (a nested block, or null), or ``key: value``;
#   ``<indent>(- )+value``; ``<indent>(- )*-`` (an entry on the next lines, or null);
# - keys: a plain word that is neither bool, null, nan nor inf (in any case), with no ``:``,
#   space or sign; or a single- or double-quoted string on one line;
# - values: such quoted strings (double-quoted escapes limited to ``\\ \" \/ \n \t \r \b
#   \f \xXX \uXXXX``, no surrogates); ``{}``; ``[]``; ``true``, ``false``, ``null``; decimal
#   ints of up to 18 digits and decimals ``-1.5`` (no exponent, no leading zero, no ``+``, no
#   ``_``: the forms both type alike and orjson reads exactly); plain strings that start with
#   a letter, ``_`` or ``/`` (not a reserved word as above), with ``-``s before a letter, with
#   digits and dots then a letter other than e, b, o, x (``100m``, ``128Mi``, ``5d9c``), or
#   with at least three dot-separated digit groups (``10.0.0.1``). Inside a plain string:
#   letters, digits, ``. _ / + = @ ~ % $ -``, non-ASCII printables other than line and
#   paragraph separators, ``:`` before such a character, and single spaces between words;
# - literal blocks ``key: |`` and ``key: |-`` in the form kubectl writes (``_without_blocks``).
#
# Anything else (anchors, aliases, tags, merge keys, folded or multi-line plain and quoted
# scalars, flow collections, directives, ``...``, tabs, trailing spaces, CR, a BOM,
# timestamps, octal, ``~``...) sends the whole file to the loader above, as does any
# rapidyaml or orjson error, a document deeper than rapidyaml's emitter goes (64), and any
# disagreement on the number of documents: what that loader builds or raises stays the
# reference. A plain scalar continued on the next line is caught after emitting (``_FOLDED``).
# kubectl (go-yaml) quotes strings that a resolver would retype, and so does PyYAML's dumper
# (though it writes 1.1's strings ``1e3`` or ``08`` plain, which this path declines): their
# dumps take this path. tests/unit/test_decode_fastyaml.py compares
# both paths on hand-written documents and on Hypothesis-generated ones.

_NON_ASCII = "\u00a1-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff"
_QUOTED_CHARS = "\u00a0" + _NON_ASCII  # a no-break space is ordinary inside quotes
_CHAR = rf"[A-Za-z0-9._/+=@~%$\-{_NON_ASCII}]"
_TAIL = rf"(?:{_CHAR}|:(?={_CHAR}))*"
# yes, no, y, n, true, false, on, off, null, nan, inf, infinity in any case (a scoped (?i:)
# costs twice as much: the line check is the fast path's largest cost after rapidyaml's).
_RESERVED = (
    r"(?:[yY](?:[eE][sS])?|[nN](?:[oO]|[aA][nN]|[uU][lL][lL])?|[tT][rR][uU][eE]"
    r"|[fF][aA][lL][sS][eE]|[oO](?:[nN]|[fF][fF])|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)"
)
_LETTER = r"[A-Za-z_/]"
_DIGITS_LETTER = r"[0-9][0-9.]*[ACDF-NP-WYZacdf-np-wyz]"  # a letter other than e, b, o, x
_DOTTED = r"[0-9]+\.[0-9]+\.[0-9]"
_PLAIN_KEY = rf"(?!{_RESERVED}:){_LETTER}[A-Za-z0-9._/\-]{{0,200}}"
_PLAIN_VALUE = (
    rf"(?:(?!-*{_RESERVED}$)-*{_LETTER}|{_DIGITS_LETTER}|{_DOTTED})"
    rf"{_TAIL}(?: {_CHAR}{_TAIL})*"
)
_TYPED = r"(?:-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,17})?|true|false|null)"
_SQ_PIECE = rf"(?:[\x20-\x26\x28-\x7e{_QUOTED_CHARS}]|'')"
_DQ_PIECE = (
    rf'(?:[\x20\x21\x23-\x5b\x5d-\x7e{_QUOTED_CHARS}]|\\[\\"/ntrbf]'
    r"|\\x[0-9a-fA-F]{2}|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4})"
)
_SQ, _DQ = rf"'{_SQ_PIECE}*'", rf'"{_DQ_PIECE}*"'
# libyaml rejects a key longer than 1024 characters; rapidyaml does not: keys stay far below.
_KEY = rf"(?:{_PLAIN_KEY}|'{_SQ_PIECE}{{0,200}}'|\"{_DQ_PIECE}{{0,200}}\")"
_VALUE = rf"(?:{_TYPED}$|{_PLAIN_VALUE}|{_SQ}|{_DQ}|\{{\}}|\[\])"
_COMMENT = rf"#[\x20-\x7e{_QUOTED_CHARS}]*"
_LINE = rf"(?: *(?:(?:- )*{_KEY}:(?: {_VALUE})?|(?:- )+{_VALUE}|(?:- )*-|{_COMMENT})|---|)"
_OUTSIDE = rf"^(?!{_LINE}$)"  # (re.MULTILINE) a line outside the subset
_CONTENT = re.compile(r"^(?! *(?:#.*)?$)", re.MULTILINE)  # the first line with content
_STARTS = re.compile(r"---(?![^\n])")  # searched by its literal; the line start checked after
# A plain scalar continued on the next, more indented line: in the subset only a line that
# starts with ``-`` can continue one (anything else is an error for both parsers), so the
# folded string holds "x -" or "\\n-". Quoted strings that hold either only cost the fast path.
_FOLDED = re.compile(r"[^ \n:] -")

_ryml: Any = None  # rapidyaml, imported on first use (False: not installed)


def _rapidyaml() -> Any:
    global _ryml
    if _ryml is None:
        try:
            import ryml  # rapidyaml: optional; without it every YAML file takes the loader

            _ryml = ryml
        except ImportError:
            _ryml = False
    return _ryml


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """rapidyaml prints a parse error to file descriptor 2 before raising it; the file then
    goes to the loader, whose own error (if any) is the one to show."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        sys.stderr.flush()
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 2)
        finally:
            os.close(null)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


_BLOCK_HEAD = rf"(?P<lead> *(?:- )*)(?P<key>{_KEY}): \|-?\n"
_BLOCK_CHARS = rf"[\x20-\x7e{_QUOTED_CHARS}]*"


@functools.cache
def _subset_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """``_OUTSIDE``, ``_BLOCK_HEAD`` and ``_BLOCK_CHARS`` compiled, on the first YAML file:
    about 65 ms that a run reading only JSON does not pay."""
    return (
        re.compile(_OUTSIDE, re.MULTILINE),
        re.compile(_BLOCK_HEAD),
        re.compile(_BLOCK_CHARS),
    )


def _without_blocks(text: str) -> str | None:
    """``text`` with the bodies of its literal block scalars cut out and their headers made
    ``key: ""``, for the line check; None when a block is one the subset leaves out.

    Taken: ``key: |`` and ``key: |-`` (kubectl's form for a string with line breaks, such as
    the last-applied-configuration annotation) whose body starts on the next line, indented
    more than the key, with every non-empty line at least as indented as the first, no line
    of spaces only, no tab or control character. Others (``|+``, an indentation indicator,
    ``>``, ``- |``, a leading empty line) are left to the line check, which declines them.
    Runtime complexity: O(len(text)), Python work per line of a block only."""
    if ": |" not in text:
        return text
    _, block_head, block_chars = _subset_patterns()
    out: list[str] = []
    done = search = 0
    while (at := text.find(": |", search)) != -1:
        search = at + 3
        start = text.rfind("\n", 0, at) + 1
        head = block_head.match(text, start)
        if head is None or head.end("key") != at:
            continue  # in a quoted string or a comment, or not a form taken: the line check
        column, body = len(head["lead"]), head.end()
        indent, end, p = 0, body, body
        while (nl := text.find("\n", p)) != -1:  # a last line without a line break: declined
            line, start_of_line, p = text[p:nl], p, nl + 1
            if not line:
                continue
            spaces = len(line) - len(line.lstrip(" "))
            if spaces <= column:
                break  # the block ended before this line
            if not indent:
                if start_of_line != body:
                    return None  # leading empty lines
                indent = spaces
            if spaces < indent or spaces == len(line) or not block_chars.fullmatch(line):
                return None
            end = p
        else:
            rest = text[p:]
            if rest and len(rest) - len(rest.lstrip(" ")) > column:
                return None  # the block's last line has no line break: PyYAML keeps none
        if end == body:
            return None  # no content line before the block ended: not a form taken
        out += (text[done:start], head["lead"], head["key"], ': ""\n')
        done = search = end
    out.append(text[done:])
    return "".join(out)


def fast_yaml_documents(text: str, data: bytes) -> list[Any] | None:
    """The documents of a YAML stream (``text`` is ``data`` decoded), built by rapidyaml and
    orjson, or None when the stream is outside the subset above, rapidyaml is not installed,
    or either of them disagrees with the stream: the caller then uses the safe loader.
    Runtime complexity: O(len(data))."""
    lines = _without_blocks(text)
    # Each distinct line once: a dump repeats most of its lines (keys, kinds, requests).
    outside = _subset_patterns()[0]
    if lines is None or outside.search("\n".join(set(lines.split("\n")))) is not None:
        return None
    starts = sum(1 for m in _STARTS.finditer(text) if not m.start() or text[m.start() - 1] == "\n")
    first = _CONTENT.search(text)
    # One document per ``---``, plus an implicit first one when content comes before any.
    count = starts + (first is not None and not text.startswith("---", first.start()))
    if count == 0:
        return []
    ryml = _rapidyaml()
    if not ryml:
        return None
    try:
        with _quiet_stderr():
            tree = ryml.parse_in_arena(data)
            root = tree.root_id()
            stream = tree.is_stream(root)
            js = ryml.emit_json(tree, root)
        del tree
        if "\\n-" in js or (" -" in js and _FOLDED.search(js) is not None):
            return None
        docs = loads_json(js)
    except Exception:
        return None
    if not stream:
        docs = [docs]
    if type(docs) is not list or len(docs) != count:
        return None
    return docs


Raw = Mapping[str, Any]


class InputError(ValueError):
    """Bad input: the message names the file, the document and the field."""


# ------------------------------------------------------------------------- shapes

# Fields whose shape the parsers take for granted: "a[]" is a list of mappings, "a" a
# mapping (when present). Checked first, so that a wrong type names its field.
_SHAPES: dict[str, tuple[tuple[str, ...], ...]] = {
    "Pod": tuple(
        tuple(p.split("."))
        for p in (
            "spec.containers[].resources",
            "spec.containers[].ports[]",
            "spec.initContainers[].resources",
            "spec.initContainers[].ports[]",
            "spec.tolerations[]",
            "spec.affinity.nodeAffinity",
            "spec.affinity.podAffinity",
            "spec.affinity.podAntiAffinity",
            "spec.topologySpreadConstraints[]",
            "metadata.ownerReferences[]",
            "status.conditions[]",
            "status.containerStatuses[]",
            "status.initContainerStatuses[]",
        )
    ),
    "Node": (("spec", "taints[]"), ("status", "images[]")),
    "PodDisruptionBudget": (("spec", "selector"),),
}


def _name_of(kind: str, raw: Raw) -> str:
    meta = raw.get("metadata")
    if not isinstance(meta, Mapping):
        return "<unnamed>"
    name = str(meta.get("name") or "<unnamed>")
    if kind in ("Node", "PriorityClass", "Namespace"):
        return name
    return f"{meta.get('namespace') or 'default'}/{name}"


def _check_shape(value: Any, path: Sequence[str], who: str, at: str) -> None:
    if not path or value is None:
        return
    head, rest = path[0], path[1:]
    name = head.removesuffix("[]")
    child = value.get(name)
    here = f"{at}.{name}" if at else name
    if child is None:
        return
    if head.endswith("[]"):
        if not isinstance(child, list):
            raise ParseError(who, here, f"expected a list, got {type(child).__name__}")
        for i, item in enumerate(child):
            if not isinstance(item, Mapping):
                raise ParseError(who, f"{here}[{i}]", f"expected a map, got {type(item).__name__}")
            _check_shape(item, rest, who, f"{here}[{i}]")
    elif not isinstance(child, Mapping):
        raise ParseError(who, here, f"expected a map, got {type(child).__name__}")
    else:
        _check_shape(child, rest, who, here)


def _guard(kind: str, raw: Raw, parse: Callable[[Raw], Any]) -> Any:
    """The parser, and when it trips over a wrong type (a list where a map is due, ...),
    the shape checks that name the field; anything else unexpected becomes a ParseError
    naming the object. Checking shapes only on failure keeps well-formed objects (nearly
    all of them) on the fast path."""
    for part in ("metadata", "spec", "status"):
        value = raw.get(part)
        if value is not None and type(value) is not dict and not isinstance(value, Mapping):
            who = f"{kind} {_name_of(kind, raw)}"
            raise ParseError(who, part, f"expected a map, got {type(value).__name__}")
    try:
        return parse(raw)
    except ParseError:
        raise
    except (AttributeError, TypeError, ValueError, KeyError) as e:
        who = f"{kind} {_name_of(kind, raw)}"
        for path in _SHAPES.get(kind, ()):
            _check_shape(raw, path, who, "")
        raise ParseError(who, "", f"malformed object ({type(e).__name__}: {e})") from e


# ------------------------------------------------------------------------- the decoder


class ObjectDecoder:
    """Raw API object -> typed record, for every kind the scheduler reads. Raises
    ``ParseError`` (object and field) or ``UnknownPriorityClassError`` (a pod's class)."""

    def __init__(self) -> None:
        self.classes: dict[str, PriorityClassInfo] = {}
        self._default: PriorityClassInfo | None = None

    def priority_class(self, raw: Raw) -> PriorityClassInfo:
        pc: PriorityClassInfo = _guard("PriorityClass", raw, priority_class_from_dict)
        self.classes[pc.name] = pc
        self._default = global_default_class(self.classes.values())
        return pc

    def forget_priority_class(self, name: str) -> None:
        if self.classes.pop(name, None) is not None:
            self._default = global_default_class(self.classes.values())

    def pod(self, raw: Raw) -> PodInfo:
        classes, default = self.classes, self._default
        out: PodInfo = _guard(
            "Pod", raw, lambda o: pod_from_dict(o, classes=classes, global_default=default)
        )
        return out

    def node(self, raw: Raw) -> NodeRecord:
        out: NodeRecord = _guard("Node", raw, node_from_dict)
        return out

    def pdb(self, raw: Raw) -> PDBInfo:
        out: PDBInfo = _guard("PodDisruptionBudget", raw, pdb_from_dict)
        return out

    def service(self, raw: Raw) -> ServiceInfo:
        out: ServiceInfo = _guard("Service", raw, service_from_dict)
        return out

    def pvc(self, raw: Raw) -> PVCInfo:
        out: PVCInfo = _guard("PersistentVolumeClaim", raw, pvc_from_dict)
        return out

    def pv(self, raw: Raw) -> PVInfo:
        out: PVInfo = _guard("PersistentVolume", raw, pv_from_dict)
        return out

    def storage_class(self, raw: Raw) -> StorageClassInfo:
        out: StorageClassInfo = _guard("StorageClass", raw, storage_class_from_dict)
        return out

    def csi_node(self, raw: Raw) -> CSINodeInfo:
        out: CSINodeInfo = _guard("CSINode", raw, csi_node_from_dict)
        return out

    def csi_driver(self, raw: Raw) -> CSIDriverInfo:
        out: CSIDriverInfo = _guard("CSIDriver", raw, csi_driver_from_dict)
        return out

    def resource_claim(self, raw: Raw) -> ResourceClaimInfo:
        out: ResourceClaimInfo = _guard("ResourceClaim", raw, resource_claim_from_dict)
        return out

    def resource_slice(self, raw: Raw) -> ResourceSliceInfo:
        out: ResourceSliceInfo = _guard("ResourceSlice", raw, resource_slice_from_dict)
        return out

    def device_taint_rule(self, raw: Raw) -> DeviceTaintRuleInfo:
        out: DeviceTaintRuleInfo = _guard("DeviceTaintRule", raw, device_taint_rule_from_dict)
        return out

    def device_class(self, raw: Raw) -> DeviceClassInfo:
        out: DeviceClassInfo = _guard("DeviceClass", raw, device_class_from_dict)
        return out

    def csi_storage_capacity(self, raw: Raw) -> CSIStorageCapacityInfo:
        out: CSIStorageCapacityInfo = _guard(
            "CSIStorageCapacity", raw, csi_storage_capacity_from_dict
        )
        return out

    def volume_attachment(self, raw: Raw) -> VolumeAttachmentInfo:
        out: VolumeAttachmentInfo = _guard("VolumeAttachment", raw, volume_attachment_from_dict)
        return out

    def selector_object(self, kind: str) -> Callable[[Raw], SelectorObject]:
        """The decoder of one workload kind (ReplicationController, ReplicaSet, StatefulSet).
        The items of a LIST carry no ``kind``: the informer (or the dump) says which."""

        def parse(o: Raw) -> SelectorObject:
            return selector_object_from_dict(o if o.get("kind") == kind else {**o, "kind": kind})

        def decode(raw: Raw) -> SelectorObject:
            out: SelectorObject = _guard(kind, raw, parse)
            return out

        return decode

    def namespace(self, raw: Raw) -> tuple[str, dict[str, str]]:
        meta = raw.get("metadata") or {}
        name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
        labels = meta.get("labels") if isinstance(meta, Mapping) else None
        if labels is not None and not isinstance(labels, Mapping):
            raise ParseError(f"Namespace {name}", "metadata.labels", "expected a map")
        return name, {str(k): str(v) for k, v in (labels or {}).items()}


# ------------------------------------------------------------------------- documents


@dataclass(frozen=True, slots=True)
class Document:
    source: str
    index: int  # 1-based, counting every YAML document of the file (JSON: 1)
    obj: Mapping[str, Any]
    item: int | None = None  # index in the document's ``items`` when it is a List

    @property
    def where(self) -> str:
        at = f"{self.source}: document {self.index}"
        return at if self.item is None else f"{at}: items[{self.item}]"

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind"))

    @property
    def name(self) -> str:
        return _name_of(self.kind, self.obj)


def _check_object(obj: Any, where: str) -> Mapping[str, Any]:
    """The shape every object needs before its kind's parser looks at it."""
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise InputError(f"{where}: expected a mapping, got {type(obj).__name__}")
    kind = obj.get("kind")
    if kind is None:
        raise InputError(f"{where}: kind: missing")
    if not isinstance(kind, str):
        raise InputError(f"{where}: kind: expected a string, got {kind!r}")
    for part in ("metadata", "spec", "status"):
        value = obj.get(part)
        if value is not None and type(value) is not dict and not isinstance(value, Mapping):
            raise InputError(f"{where}: {part}: expected a mapping, got {type(value).__name__}")
    return obj


def _walk(raw: Any, source: str, index: int) -> Iterator[Document]:
    if raw is None:
        return  # an empty document (e.g. after a trailing ---)
    where = f"{source}: document {index}"
    obj = _check_object(raw, where)
    kind = str(obj["kind"])
    if kind == "List" or (kind.endswith("List") and "items" in obj):
        items = obj.get("items") or []
        if not isinstance(items, list):
            raise InputError(f"{where}: items: expected a list, got {type(items).__name__}")
        # A List's items may omit kind (kubectl fills it in); take it from the List's.
        item_kind = kind.removesuffix("List") if kind != "List" else None
        for j, item in enumerate(items):
            if type(item) is dict:
                if item_kind and "kind" not in item:
                    item["kind"] = item_kind
                # _check_object's checks inline for the usual item (a dict whose kind is a
                # string and whose parts are dicts), without formatting where it is.
                meta, spec, status = item.get("metadata"), item.get("spec"), item.get("status")
                if (
                    type(item.get("kind")) is str
                    and (meta is None or type(meta) is dict)
                    and (spec is None or type(spec) is dict)
                    and (status is None or type(status) is dict)
                ):
                    yield Document(source, index, item, j)
                    continue
            elif item_kind and isinstance(item, dict) and "kind" not in item:
                item["kind"] = item_kind
            yield Document(source, index, _check_object(item, f"{where}: items[{j}]"), j)
    else:
        yield Document(source, index, obj)


def _files(path: str) -> list[tuple[str, Path | None]]:
    if path == "-":
        return [("-", None)]
    p = Path(path)
    if p.is_dir():
        found = sorted(f for f in p.iterdir() if f.is_file() and f.suffix in YAML_SUFFIXES)
        if not found:
            raise InputError(f"{path}: no .yaml, .yml or .json file in this directory")
        return [(str(f), f) for f in found]
    return [(path, p)]


def _read(name: str, path: Path | None) -> bytes:
    try:
        return sys.stdin.buffer.read() if path is None else path.read_bytes()
    except OSError as e:
        raise InputError(f"{name}: cannot read: {e.strerror or e}") from e


def _yaml_documents(name: str, data: bytes) -> Iterator[tuple[int, Any]]:
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        raise InputError(f"{name}: cannot read: not UTF-8 text ({e.reason})") from e
    fast = fast_yaml_documents(text, data)
    if fast is not None:
        yield from enumerate(fast, 1)
        return
    docs = yaml.load_all(text, Loader=_YAML_LOADER)
    index = 0
    while True:
        index += 1
        try:
            raw = next(docs)
        except StopIteration:
            return
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark is not None else ""
            problem = getattr(e, "problem", None) or str(e)
            raise InputError(f"{name}: document {index}: not valid YAML{at}: {problem}") from e
        yield index, raw


def load_documents(
    paths: Sequence[str], *, progress: Callable[[str, int], None] | None = None
) -> list[Document]:
    """Every object of every file, in order: ``-`` is standard input, a directory means its
    .yaml/.yml/.json files in name order. A file whose first character opens a JSON object
    or array is read as JSON (one value: ``kubectl get -o json`` prints a List), anything
    else as multi-document YAML. ``progress(source, objects so far)`` is called now and
    then. Raises InputError naming the file, the document and the field."""
    out: list[Document] = []
    for path in paths:
        for name, file in _files(path):
            data = _read(name, file)
            head = data.lstrip()[:1]
            if head in (b"{", b"["):
                try:
                    raws: Iterator[tuple[int, Any]] = iter([(1, loads_json(data))])
                except ValueError:
                    raws = _yaml_documents(name, data)  # YAML's flow style also starts so
            else:
                raws = _yaml_documents(name, data)
            for index, raw in raws:
                before = len(out)
                out.extend(_walk(raw, name, index))
                if progress is not None and len(out) // 10000 != before // 10000:
                    progress(name, len(out))
            if progress is not None:
                progress(name, len(out))
    return out
