"""The YAML syntax layer: one file's bytes -> documents with their positions, or diagnostics.

Everything here is a pure function of (path, bytes), so a ``ParsedFile`` can be cached by git blob id.
Parsing uses libyaml (``CSafeLoader``), which composes nodes with marks in C at little extra cost; the
marks of a document's first node give its position. Hostile input is checked *before* libyaml sees it
where libyaml itself would crash (deep nesting overflows its recursive composer) and before
construction where the constructed data would explode (alias bombs).
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any

import yaml

from reconciler.manifests.schema import Problem, field_path
from reconciler.model.diagnostics import Diagnostic

MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 100
# Nodes a document may expand to through aliases, and alias uses per document.
MAX_EXPANDED_NODES = 100_000
MAX_ALIASES = 100
MAX_DOCUMENTS = 10_000  # YAML documents in one file (empty ones count: each costs the parser a pass)
_DOCUMENT_START = re.compile(r"^---(?=[ \t\r\n]|$)", re.MULTILINE)

_TAB_INDENT = re.compile(r"^[ ]*\t", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Document:
    """One YAML document: plain Python data and the 1-based position of its first node."""

    index: int
    line: int
    column: int
    data: Any
    # Problems found while building the data (duplicate keys), reported with the document's identity.
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True)
class ParsedFile:
    """The syntax layer's verdict on one file.

    ``complete`` is False when part of the file could not be read into documents (a syntax error, a
    hostile construct): then something in it may be a resource nobody can see, and nothing may be pruned.
    ``text`` is kept so that positions inside a document can be found again when it fails validation.
    """

    path: str
    documents: tuple[Document, ...]
    diagnostics: tuple[Diagnostic, ...]
    text: str
    complete: bool


def _error(path: str, line: int, column: int, message: str) -> Diagnostic:
    return Diagnostic(file=path, line=line, column=column, message=message)


def _reject(path: str, diagnostic: Diagnostic, text: str = "") -> ParsedFile:
    return ParsedFile(path=path, documents=(), diagnostics=(diagnostic,), text=text, complete=False)


def _decode(path: str, data: bytes) -> str | Diagnostic:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        message = f"file is not valid UTF-8 (byte 0x{data[exc.start]:02x}); save it as UTF-8"
        return _error(path, line, column, message)
    return text.removeprefix("\ufeff")


def _depth_bound(text: str) -> int:
    """A cheap upper bound of the nesting depth.

    Flow nesting needs a ``[`` or ``{`` per level. Block levels active on a line have distinct
    indentation below the line's own (at most two per column: a mapping and its sequence value), and
    each level opened on the line itself needs an indicator (``-``, ``:`` or ``?``).
    """
    flow = text.count("[") + text.count("{")
    longest = max(map(len, text.split("\n")))
    if flow + 2 * (longest + 1) <= MAX_DEPTH:
        return flow + 2 * (longest + 1)
    block = 0
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        block = max(block, 2 * (indent + 1) + line.count("-") + line.count(":") + line.count("?"))
    return flow + block


def _exact_depth(text: str) -> tuple[int, int, int]:
    """Exact maximum nesting depth from libyaml's (iterative) event stream, and where it is reached."""
    depth = deepest = 0
    where = (0, 0)
    loader = MemoLoader(text)
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > deepest:
                    deepest = depth
                    mark = event.start_mark
                    where = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
                if deepest > MAX_DEPTH:
                    break
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        # libyaml may refuse deep nesting itself (its own limit, in its own words, which change between
        # releases): measure the flow nesting open where it stopped, so the refusal is ours either way.
        mark = exc.problem_mark
        if mark is not None and deepest <= MAX_DEPTH:
            open_flow = _open_flow_depth(text, mark.index)
            if open_flow > MAX_DEPTH:
                return open_flow, mark.line + 1, mark.column + 1
    except yaml.YAMLError:
        pass  # the syntax error is reported by the real parse
    finally:
        loader.dispose()
    return deepest, where[0], where[1]


def _open_flow_depth(text: str, end: int) -> int:
    """Flow collections (``[``/``{``) still open at ``end``: an upper bound that ignores quoting."""
    head = text[:end]
    return head.count("[") + head.count("{") - head.count("]") - head.count("}")


def _alias_problem(root: yaml.Node) -> str | None:
    """Refuse documents whose aliases expand beyond a small budget, or refer to themselves."""
    sizes: dict[int, int] = {}
    aliases = 0
    # Iterative post-order walk over the node graph; shared nodes are aliases.
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_nodes.discard(key)
            total = 1 + sum(sizes[id(c)] for c in _children(node))
            if total > MAX_EXPANDED_NODES:
                return f"YAML aliases expand to more than {MAX_EXPANDED_NODES} nodes (alias bomb); refused"
            sizes[key] = total
            continue
        if key in sizes:
            aliases += 1
            if aliases > MAX_ALIASES:
                return f"more than {MAX_ALIASES} YAML aliases in one document; refused"
            continue
        if key in open_nodes:
            return "a YAML alias refers to a node that contains it (recursive alias); refused"
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
    return None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_BOOL_VALUES = yaml.constructor.SafeConstructor.bool_values
_SCALAR, _SEQUENCE, _MAPPING = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode


_TAGS: dict[str, str] = {}
_TAGS_MAX = 50_000
_RESOLVE: Any = yaml.resolver.Resolver.resolve


class MemoLoader(yaml.CSafeLoader):
    """CSafeLoader with a memo of implicit tags: libyaml's composer calls the pure-Python resolver for
    every scalar, and the same plain scalars ("name", "apiVersion", "palette.ai/v1alpha1"...) recur in
    every manifest. Path resolvers are not used, so their per-node hooks are skipped."""

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> Any:
        if kind is _SCALAR:
            if implicit[0]:
                tag = _TAGS.get(value)
                if tag is None:
                    tag = _RESOLVE(self, kind, value, implicit)
                    if len(_TAGS) >= _TAGS_MAX:
                        _TAGS.clear()
                    _TAGS[value] = tag
                return tag
            if not self.yaml_path_resolvers:
                return _STR  # a quoted scalar: what the resolver answers without path resolvers
        elif not self.yaml_path_resolvers:
            return _SEQ if kind is _SEQUENCE else _MAP  # likewise for collections
        return _RESOLVE(self, kind, value, implicit)

    # libyaml's composer calls these two hooks around every node, for path resolvers, which are not
    # used: C callables that take the same arguments and do nothing useful cost a sixth of a parse less
    # than Python methods (their results are ignored).
    descend_resolver = staticmethod(operator.is_)  # type: ignore[assignment]
    ascend_resolver = staticmethod(tuple)  # type: ignore[assignment]


class _Fallback(Exception):
    """A node the fast path does not handle: construct the document with PyYAML's SafeConstructor."""


class _BadValue(Exception):
    """A scalar whose tag says what it is but whose text is not that (``2024-13-45``, ``!!int abc``,
    an integer of more than 4,300 digits): PyYAML raises plain Python errors for these."""

    def __init__(self, line: int, column: int, tag: str) -> None:
        super().__init__(tag)
        self.line, self.column, self.tag = line, column, tag

    def message(self) -> str:
        if not self.tag:
            return (
                "a value of this document cannot be read as its YAML type (a date, a number, a tagged "
                "value); quote it to make it a string"
            )
        what = self.tag.rsplit(":", 1)[-1]
        return f"this value reads as YAML type '{what}' but is not a valid one; quote it to make it a string"


def _construct(node: yaml.Node, loader: yaml.CSafeLoader, dups: list[tuple[yaml.Node, yaml.Node]]) -> Any:
    """Plain data from a node tree without anchors.

    PyYAML's SafeConstructor is pure Python and general; manifests are mappings of strings, decimal
    integers and booleans, which this builds several times faster with the same result (other scalars
    go through SafeConstructor one by one). Unlike SafeConstructor it reports duplicate keys, which YAML
    forbids and which would otherwise silently drop the first value: ``dups`` gets (mapping, key node) of
    each, in document order. Merge keys and non-string keys raise ``_Fallback``. Depth is bounded by
    ``MAX_DEPTH``.
    """
    tag = node.tag
    cls = node.__class__
    if cls is _SCALAR:
        value: str = node.value
        if tag == _STR:
            return value
        if (
            tag == _INT
            and len(value) <= 18
            and value.isdigit()
            and value.isascii()
            and (value[0] != "0" or value == "0")
        ):
            return int(value)
        if tag == _BOOL:
            return _BOOL_VALUES[value.lower()]
        if tag == _NULL:
            return None
        try:
            return loader.construct_object(node, deep=True)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # PyYAML's scalar constructors raise ValueError, AttributeError...
            mark = node.start_mark
            raise _BadValue(mark.line + 1, mark.column + 1, tag) from exc
    if cls is _MAPPING and tag == _MAP:
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag != _STR or key_node.__class__ is not _SCALAR:
                raise _Fallback  # merge keys, non-string keys: let SafeConstructor decide
            key = key_node.value
            if key in out:
                dups.append((node, key_node))
            if value_node.__class__ is _SCALAR and value_node.tag == _STR:
                out[key] = value_node.value  # the common case, without a call
            else:
                out[key] = _construct(value_node, loader, dups)
        return out
    if cls is _SEQUENCE and tag == _SEQ:
        return [_construct(child, loader, dups) for child in node.value]
    raise _Fallback


def _duplicate_problems(root: yaml.Node, dups: list[tuple[yaml.Node, yaml.Node]]) -> list[Problem]:
    """The problems of duplicate keys, with the field path of each (found again: duplicates are rare)."""
    paths: dict[int, tuple[str | int, ...]] = {}
    stack: list[tuple[yaml.Node, tuple[str | int, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, yaml.MappingNode):
            paths[id(node)] = path
            stack.extend((v, (*path, k.value)) for k, v in node.value if isinstance(k, yaml.ScalarNode))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, (*path, i)) for i, child in enumerate(node.value))
    problems = []
    for mapping, key_node in dups:
        path = (*paths.get(id(mapping), ()), key_node.value)
        mark = key_node.start_mark
        message = f"{field_path(path)}: duplicate key {key_node.value!r}; YAML keeps only the last value"
        problems.append(Problem(path, message, at_key=True, at=(mark.line + 1, mark.column + 1)))
    return problems


def _construct_document(
    loader: yaml.CSafeLoader, node: yaml.Node, has_anchors: bool
) -> tuple[Any, list[Problem]]:
    if not has_anchors:
        dups: list[tuple[yaml.Node, yaml.Node]] = []
        try:
            data = _construct(node, loader, dups)
            return data, _duplicate_problems(node, dups) if dups else []
        except _Fallback:
            pass
    try:
        return loader.construct_document(node), []
    except yaml.YAMLError:
        raise
    except Exception as exc:  # as above, for documents the fast path hands over
        mark = node.start_mark
        raise _BadValue(mark.line + 1, mark.column + 1, "") from exc


def parse_file(path: str, data: bytes) -> ParsedFile:
    """Parse one file's bytes into documents. Pure: the same bytes always give the same result."""
    if len(data) > MAX_FILE_BYTES:
        message = f"file is {len(data)} bytes; the limit is {MAX_FILE_BYTES} (1 MiB)"
        return _reject(path, _error(path, 0, 0, message))
    decoded = _decode(path, data)
    if isinstance(decoded, Diagnostic):
        return _reject(path, decoded)
    text = decoded
    if not text.strip():
        diag = _error(path, 1, 1, "file is empty: expected at least one YAML document")
        return ParsedFile(path=path, documents=(), diagnostics=(diag,), text=text, complete=True)
    if "\t" in text:
        tab = _TAB_INDENT.search(text)
        if tab is not None:
            line = text.count("\n", 0, tab.start()) + 1
            column = tab.end() - tab.start()
            message = "tab character in indentation; YAML allows only spaces"
            return _reject(path, _error(path, line, column, message), text)
    too_many = _documents_over_limit(text)
    if too_many is not None:
        message = (
            f"more than {MAX_DOCUMENTS:,} YAML documents in one file (document {MAX_DOCUMENTS + 1:,} starts "
            "here); refused: split the file"
        )
        return _reject(path, _error(path, too_many, 1, message), text)
    if _depth_bound(text) > MAX_DEPTH:
        depth, line, column = _exact_depth(text)
        if depth > MAX_DEPTH:
            message = f"nesting deeper than {MAX_DEPTH} levels; refused"
            return _reject(path, _error(path, line, column, message), text)
    return _load(path, text, has_anchors="&" in text)


def _documents_over_limit(text: str) -> int | None:
    """The line of the first document past :data:`MAX_DOCUMENTS` (None when within it). Documents are
    counted by their start markers (``---`` at the start of a line, which ends any scalar), so the
    check costs one scan, not a parse; the first document needs no marker."""
    if text.count("---") < MAX_DOCUMENTS:
        return None
    starts = 0 if text.lstrip().startswith("---") else 1
    for found in _DOCUMENT_START.finditer(text):
        starts += 1
        if starts > MAX_DOCUMENTS:
            return text.count("\n", 0, found.start()) + 1
    return None


def _load(path: str, text: str, has_anchors: bool) -> ParsedFile:
    documents: list[Document] = []
    diagnostics: list[Diagnostic] = []
    complete = True
    loader = MemoLoader(text)
    index = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                break
            line, column = node.start_mark.line + 1, node.start_mark.column + 1
            problem = _alias_problem(node) if has_anchors else None
            if problem is not None:
                diagnostics.append(_error(path, line, column, problem))
                complete = False
            else:
                try:
                    data, problems = _construct_document(loader, node, has_anchors)
                except _BadValue as bad:
                    diagnostics.append(_error(path, bad.line, bad.column, bad.message()))
                    complete = False
                    data, problems = None, []
                # An empty document (a trailing ``---``) says nothing: skip it.
                if data is not None:
                    doc = Document(index=index, line=line, column=column, data=data, problems=tuple(problems))
                    documents.append(doc)
            index += 1
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        what = " ".join(p for p in (exc.context, exc.problem) if p)
        diagnostics.append(_error(path, line, column, f"YAML syntax error: {what}"))
        complete = False
    except yaml.YAMLError as exc:
        diagnostics.append(_error(path, 0, 0, f"YAML error: {exc}"))
        complete = False
    finally:
        loader.dispose()
    if not documents and not diagnostics:
        message = "file holds only empty documents: expected at least one resource"
        diagnostics.append(_error(path, 1, 1, message))
    return ParsedFile(
        path=path, documents=tuple(documents), diagnostics=tuple(diagnostics), text=text, complete=complete
    )
