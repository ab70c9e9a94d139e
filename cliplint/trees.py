"""CPython's tree of a text, without libcst: parsing it, walking it at half `ast.walk`'s cost,
how deep libcst's tree of it would nest, and its lines as CPython counts them.
"""
from __future__ import annotations

import ast
import re
from typing import Callable, Dict, Iterator, List, Optional, Tuple, Type

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def split_lines(text: str) -> List[str]:
    """Lines as CPython counts them (\\n, \\r\\n, \\r), ends kept; str.splitlines also
    splits on form feeds and other separators."""
    return _LINE.findall(text)


_CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}


def walk(root: ast.AST) -> Iterator[ast.AST]:
    """Every node, like `ast.walk` at about half its cost (see `ast_children`)."""
    todo = [root]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(ast_children(node))


def nesting(tree: ast.AST, visitors: Optional[Dict[type, Callable[[ast.AST], None]]] = None
            ) -> Tuple[int, int, int]:
    """How deep libcst's tree of this CPython tree nests (one level a node, except a chain of
    `and`/`or`, one level an operand: libcst's is binary), the line of its deepest node, and
    how many nodes it has; `visitors[type(node)]` is called on every node of that type. Walked
    with an explicit stack: the tree may be deeper than Python's recursion limit. Every file a
    rule could fire on is walked once, so the loop is written out (no call per node)."""
    visitors = visitors or {}
    deepest, line, nodes = 0, 1, 0
    stack: List[Tuple[ast.AST, int]] = [(tree, 0)]
    push, pop, fields_of, AST = stack.append, stack.pop, _CHILD_FIELDS, ast.AST
    while stack:
        node, depth = pop()
        nodes += 1
        kind = type(node)
        depth += len(node.values) - 1 if kind is ast.BoolOp else 1  # type: ignore[attr-defined]
        if depth > deepest:
            deepest, line = depth, getattr(node, "lineno", line)
        visit = visitors.get(kind)
        if visit is not None:
            visit(node)
        fields = fields_of.get(kind)
        if fields is None:
            fields = _child_fields(kind)
        for field in fields:
            value = getattr(node, field, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, AST):  # not None keys, str names
                        push((item, depth))
            elif isinstance(value, AST):
                push((value, depth))
    return deepest, line, nodes


# Fields that never hold a node: skipped without a look (`Name.id`, `Constant.value`, ...).
_SCALAR_FIELDS = frozenset({"ctx", "id", "attr", "arg", "name", "module", "level", "kind", "type_comment",
                            "is_async", "conversion", "simple", "asname", "n", "s"})


def _child_fields(kind: Type[ast.AST]) -> Tuple[str, ...]:
    fields = tuple(f for f in kind._fields if f not in _SCALAR_FIELDS and not (kind is ast.Constant and f == "value"))
    _CHILD_FIELDS[kind] = fields
    return fields


def ast_children(node: ast.AST) -> List[ast.AST]:
    """A node's children without expression contexts, and without field introspection per
    node: the fields of each node type are looked up once."""
    kind = type(node)
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = _child_fields(kind)
    found: List[ast.AST] = []
    for field in fields:
        value = getattr(node, field, None)
        if type(value) is list:
            found.extend(item for item in value if isinstance(item, ast.AST))  # not None keys, str names
        elif isinstance(value, ast.AST):
            found.append(value)
    return found


def cpython_tree(text: str) -> Optional[ast.Module]:
    """CPython's tree of `text`, or None where CPython cannot build one (too deep for it too)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
