"""The node numbers of an editor's document, kept per statement and spliced: an edit
re-indexes only the statements it touched.

A `StatementIndex` numbers one top-level statement (or one statement of a split class) from
wherever the document puts it; a `DocumentIndex` is the module's, joined from them, and
brought up to date by removing the replaced statements' parts and adding the new ones.
Rules only compare the numbers, so a statement's may start anywhere as long as the
statements' ranges keep their source order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import libcst as cst

from ..analysis import TreeIndex
from ..flow.nodes import children, first_numbered

Parents = Dict[cst.CSTNode, Optional[cst.CSTNode]]
Numbers = Dict[cst.CSTNode, int]
ByType = Dict[type, List[cst.CSTNode]]
# A node numbered by another index (a class's member): given it and the number reached, the
# number to go on from; None for a node this index numbers itself.
Elsewhere = Callable[[cst.CSTNode, int], Optional[int]]


@dataclass
class StatementIndex:
    """One statement's nodes: parents, pre- and post-order numbers from `first`, `size`
    numbers in all, nodes by type. `scattered`: the nodes of one type are not consecutive in
    source order (a class whose members other indexes number)."""

    parent: Parents
    pre: Numbers
    post: Numbers
    by_type: ByType
    first: int
    size: int
    scattered: bool = False

    @property
    def end(self) -> int:
        """The number after its last node's."""
        return self.first + self.size

    @classmethod
    def of(cls, statement: cst.CSTNode, first: int) -> "StatementIndex":
        tree = TreeIndex(statement, first)
        return cls(tree.parent, tree.pre, tree.post, tree.by_type, first, tree.size)

    @classmethod
    def around(cls, statement: cst.CSTNode, first: int, elsewhere: Elsewhere) -> "StatementIndex":
        """The nodes of `statement` less the subtrees `elsewhere` numbers (it is told the
        number reached and says where to go on from)."""
        counter = first
        index = cls({}, {}, {}, {}, first, 0, scattered=True)
        stack: List[Tuple[cst.CSTNode, Optional[cst.CSTNode], bool]] = [(statement, None, False)]
        while stack:
            node, above, leaving = stack.pop()
            if leaving:
                index.post[node] = counter
                counter += 1
                continue
            index.parent[node] = above
            after = elsewhere(node, counter)
            if after is not None:
                counter = after
                continue
            index.pre[node] = counter
            index.by_type.setdefault(type(node), []).append(node)
            stack.append((node, above, True))
            stack.extend((child, node, False) for child in reversed(children(node)))
            counter += 1
        index.size = counter - first
        return index

    def renamed(self, renamed: Dict[cst.CSTNode, cst.CSTNode], parents: Dict[cst.CSTNode, cst.CSTNode],
                dropped: Sequence[cst.CSTNode]) -> "StatementIndex":
        """A copy with nodes replaced by their rebuilt versions (`renamed`: a class and its body
        around a re-parsed method), the parents of the nodes it does not number set (`parents`)
        and those of `dropped` forgotten. The numbers stay."""
        parent: Parents = {renamed.get(node, node): renamed.get(above, above) if above is not None else None
                           for node, above in self.parent.items()}
        for node in dropped:
            parent.pop(node, None)
        parent.update(parents)
        return StatementIndex(parent, {renamed.get(node, node): number for node, number in self.pre.items()},
                              {renamed.get(node, node): number for node, number in self.post.items()},
                              {kind: [renamed.get(node, node) for node in nodes]
                               for kind, nodes in self.by_type.items()},
                              self.first, self.size, self.scattered)


class DocumentIndex:
    """The index of a module, joined from its statements' (merging dicts reuses their stored
    hashes: no node is hashed again) and spliced in place edit after edit."""

    def __init__(self, module: cst.Module, statements: Sequence[StatementIndex]) -> None:
        self.parent: Parents = {}
        self.pre: Numbers = {}
        self.post: Numbers = {}
        self.by_type: ByType = {}
        self.module = module
        self.splice(module, (), statements)

    def splice(self, module: cst.Module, removed: Sequence[StatementIndex], added: Sequence[StatementIndex]) -> None:
        """In place: the index of `module`, which has the statements of `added` where the
        previous module had those of `removed` (the work is the size of the edit)."""
        for part in removed:
            for kind, nodes in part.by_type.items():
                listed = self.by_type[kind]
                for run in ([node] for node in nodes) if part.scattered else (nodes,):
                    at = first_numbered(listed, part.pre[run[0]], self.pre)
                    del listed[at:at + len(run)]
            for numbers in (self.parent, self.pre, self.post):
                for node in part.pre:
                    del numbers[node]
        for part in added:  # the parts whose parents must win come last
            self.parent.update(part.parent)
            self.pre.update(part.pre)
            self.post.update(part.post)
            for kind, nodes in part.by_type.items():
                listed = self.by_type.setdefault(kind, [])
                for run in ([node] for node in nodes) if part.scattered else (nodes,):
                    at = first_numbered(listed, part.pre[run[0]], self.pre)
                    listed[at:at] = run
        self._root(module)

    def _root(self, module: cst.Module) -> None:
        """Number the module around its statements and make it their parent."""
        for numbers in (self.parent, self.pre, self.post):
            numbers.pop(self.module, None)
        self.module = module
        self.parent[module], self.pre[module] = None, -1
        for statement in module.body:
            self.parent[statement] = module
        self.post[module] = self.post[module.body[-1]] + 1 if module.body else 0
        self.by_type[cst.Module] = [module]
