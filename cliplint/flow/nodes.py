"""CST utilities every part of the dataflow uses: a node's children, a walk, the names an
assignment target binds, call arguments, `None` tests, and where a node goes among nodes kept
in source order.

`ModuleIndex` is what the dataflow reads from an indexed module (`analysis.Context` is one):
a structural type, so this package does not import the module that builds it.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Iterator, List, Optional, Protocol, Sequence, Tuple, Type, TypeVar, Union, overload

import libcst as cst

from ..names import ImportTable

N = TypeVar("N", bound=cst.CSTNode)  # `nodes(cst.Call)` is a list of calls
M = TypeVar("M", bound=cst.CSTNode)

# Compared with type(), not isinstance: libcst's nodes are ABCs, and these tests run per name.
SCOPE_TYPES = frozenset((cst.Module, cst.FunctionDef, cst.Lambda, cst.ClassDef))
COMPREHENSION_TYPES = frozenset((cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp))
MAX_DEPTH = 8

# What a call runs that has parameters and returns a value.
Function = Union[cst.FunctionDef, cst.Lambda]


class ModuleIndex(Protocol):
    """One parsed module, indexed: parents, source order (pre/post), nodes by type, imports."""

    module: cst.Module
    imports: ImportTable
    parent: Dict[cst.CSTNode, Optional[cst.CSTNode]]
    pre: Dict[cst.CSTNode, int]
    post: Dict[cst.CSTNode, int]
    own: Dict[cst.CSTNode, int]  # the file's own nodes (`pre` may hold a project link's too)

    @overload
    def nodes(self, kind: Type[N], /) -> List[N]: ...

    @overload
    def nodes(self, kind: Type[N], other: Type[M], /) -> List[Union[N, M]]: ...

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]: ...

    def encloses(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool: ...

    def qualify(self, expr: cst.BaseExpression) -> Optional[str]: ...

    def call_name(self, node: Optional[cst.CSTNode]) -> Optional[str]: ...

    def text(self, node: cst.CSTNode) -> str: ...


# Tokens and whitespace: never what a rule looks for, and most of the nodes of a tree.
_SKIPPED = (cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline, cst.TrailingWhitespace,
            cst.EmptyLine, cst.Comment, cst.Comma, cst.Dot, cst.LeftParen, cst.RightParen, cst.LeftSquareBracket,
            cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.Colon, cst.AssignEqual,
            cst.Semicolon)
_CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _child_fields(kind: type) -> Tuple[str, ...]:
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = _CHILD_FIELDS[kind] = tuple(
            f.name for f in dataclasses.fields(kind)
            if not f.name.startswith(("whitespace", "lpar", "rpar", "comma", "semicolon", "leading_lines",
                                      "lines_after", "header", "footer", "trailing_whitespace", "lbracket",
                                      "rbracket", "lbrace", "rbrace", "colon", "equal", "dot", "star",
                                      "default_newline", "default_indent", "encoding", "has_trailing_newline",
                                      "indent", "first_line", "newline", "quote", "prefix", "operator")))
    return fields


_KEEP: Dict[type, bool] = {}


def _kept(kind: type) -> bool:
    """Is a value of this type a node to index? (cached: isinstance on libcst's ABCs is slow)"""
    keep = _KEEP.get(kind)
    if keep is None:
        mro = kind.__mro__  # not issubclass: its first call per class walks libcst's ABC registry
        keep = _KEEP[kind] = cst.CSTNode in mro and not any(skipped in mro for skipped in _SKIPPED)
    return keep


def first_numbered(nodes: Sequence[cst.CSTNode], number: int, pre: Dict[cst.CSTNode, int]) -> int:
    """Where a node numbered `number` (in pre-order) goes in `nodes`, which are in source order:
    the first one numbered `number` or more. Python 3.9's bisect takes no key."""
    if not nodes or pre[nodes[-1]] < number:
        return len(nodes)  # after them all: the usual case when nodes are added in source order
    low, high = 0, len(nodes)
    while low < high:
        middle = (low + high) // 2
        if pre[nodes[middle]] < number:
            low = middle + 1
        else:
            high = middle
    return low


def children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The child nodes a rule can care about, in field order (cheaper than `node.children`,
    which regenerates the node; whitespace, brackets and commas are left out)."""
    found: List[cst.CSTNode] = []
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        kind = type(value)
        if kind is list or kind is tuple:
            found.extend(v for v in value if _kept(type(v)))
        elif _kept(kind):
            found.append(value)
    return found


def walk(node: cst.CSTNode, prune: Optional[Callable[[cst.CSTNode], bool]] = None) -> Iterator[cst.CSTNode]:
    """`node` and everything under it in source order; not a subtree whose root `prune` accepts."""
    stack = [node]
    while stack:
        current = stack.pop()
        if prune is not None and prune(current):
            continue
        yield current
        stack.extend(reversed(children(current)))


def target_names(target: cst.CSTNode, path: Tuple[int, ...] = ()) -> Iterator[Tuple[cst.Name, Tuple[int, ...]]]:
    """Names bound by an assignment or loop target, with their unpacking path."""
    if isinstance(target, cst.Name):
        yield target, path
    elif isinstance(target, (cst.Tuple, cst.List)):
        for i, element in enumerate(target.elements):
            if isinstance(element, cst.Element):
                yield from target_names(element.value, path + (i,))
    elif isinstance(target, cst.StarredElement):
        yield from target_names(target.value, path)


def grandparent(ctx: ModuleIndex, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The parent of `node`'s parent: the call a lambda is an argument of (`map(lambda g: ..., grads)`)."""
    parent = ctx.parent.get(node)
    return ctx.parent.get(parent) if parent is not None else None


def is_none(node: Optional[cst.CSTNode]) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def tests_none(node: cst.CSTNode, name: str) -> bool:
    """Does `node` compare `name` (or an item of it: `gv[0]` of a `(grad, var)` pair) with None
    anywhere (`g is not None`, `g is None`, `g != None`)?"""
    for sub in walk(node):
        if isinstance(sub, cst.Comparison) and len(sub.comparisons) == 1:
            left, right = sub.left, sub.comparisons[0].comparator
            if name in (_tested(left), _tested(right)) and (is_none(left) or is_none(right)):
                return True
    return False


def _tested(side: cst.BaseExpression) -> Optional[str]:
    while isinstance(side, cst.Subscript):
        side = side.value
    return side.value if isinstance(side, cst.Name) else None


def arg(call: cst.Call, index: int, keyword: Optional[str] = None) -> Optional[cst.BaseExpression]:
    """The argument at position `index` or with keyword `keyword`."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if keyword is not None:
        for a in call.args:
            if a.keyword is not None and a.keyword.value == keyword:
                return a.value
    return positional[index].value if index < len(positional) else None
