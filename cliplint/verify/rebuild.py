"""Layer 1: rebuild each snippet from its syntax tree so that it can only name allowlisted symbols.

Runs in the cliplint process, before anything is sent to the worker. The snippet is parsed with
Python's own `ast` (so identifiers are read exactly as Python would run them, NFKC-normalised), and
a new tree is built node by node:

- a name or attribute chain rooted at an import must resolve, through the file's import map, to an
  entry of `SYMBOLS`; the whole chain becomes one synthetic name (`_L_tensorflow__math__log`)
  that the worker binds to that one object, so no module object is ever in the snippet's reach;
- an attribute of a name the snippet does not define (`args.lr`, `self.out`) that is not in
  `ATTRIBUTES` is replaced whole by a stand-in (`_S_args__lr`, a placeholder number);
- builtins: only `BUILTINS`; strings: only `STRINGS`; `name=` keywords dropped;
- statements: assignments, expressions, `for`, `if`, `pass`, `break`, `continue`;
- anything else (lambdas, f-strings, walrus, other attributes, other builtins, imports, names or
  attributes starting with `_`, a tree deeper than `MAX_DEPTH`, ...) refuses the snippet: the
  finding is `skipped`, naming it.

Names only: the values a snippet builds at run time are checked in the worker (`probes.guard`).

What the worker receives is `ast.unparse` of the new tree: exactly what was checked.
"""
from __future__ import annotations

import ast
import builtins
import textwrap
from typing import Dict, List, Optional, Tuple, Union

from .allowlist import (
    ATTRIBUTES,
    BUILTINS,
    DROPPED_KEYWORDS,
    FLOAT_STRINGS,
    LEGACY_OPTIMIZER_KEYWORDS,
    SETTABLE,
    SHIM_NOTES,
    STRINGS,
    allowed,
    entry,
    identifier,
    legacy_backend,
    migrated,
)

SYMBOL_PREFIX, STAND_IN_PREFIX = "_L_", "_S_"
MAX_SHOWN = 60
# The deepest syntax tree layer 1 rebuilds. The rebuild, `ast.unparse` and the worker's `compile`
# all recurse once or more per level: a 5,000-term sum would exhaust Python's stack in the parent.
# Checked iteratively before any of them runs; real training code stays far below it.
MAX_DEPTH = 100


class Refused(Exception):
    """The snippet names something that is not allowed; the message says exactly what."""


_STATEMENTS = (ast.Assign, ast.AugAssign, ast.Expr, ast.For, ast.If, ast.Pass, ast.Break, ast.Continue)
_EXPRESSIONS = (ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.Dict, ast.Set, ast.ListComp, ast.SetComp,
                ast.DictComp, ast.GeneratorExp, ast.Compare, ast.Call, ast.Constant, ast.Attribute, ast.Subscript,
                ast.Starred, ast.Name, ast.List, ast.Tuple, ast.Slice)
_PLAIN = (ast.Module, ast.comprehension, ast.keyword, ast.expr_context, ast.boolop, ast.operator, ast.unaryop,
          ast.cmpop)
_LITERALS = (int, float, complex, bool, type(None), type(Ellipsis))


def symbol_name(qualified: str) -> str:
    return SYMBOL_PREFIX + entry(qualified).replace(".", "__")


def stand_in_name(chain: str) -> str:
    return STAND_IN_PREFIX + chain.replace(".", "__")


def shown(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."


def name_parts(node: ast.AST) -> Optional[List[str]]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


class Rebuilder(ast.NodeTransformer):
    """One snippet's rebuild; collects the symbols, stand-ins and notes it introduced."""

    def __init__(self, imports: Dict[str, str], bound: frozenset, values: Optional[Dict[str, object]] = None) -> None:
        self.imports = {identifier(k): v for k, v in imports.items()}
        self.bound = bound  # names the snippet itself assigns (or its comprehensions bind)
        self.values = values or {}  # attribute chains the static analysis read a value for
        self.symbols: Dict[str, str] = {}
        self.written: Dict[str, str] = {}  # synthetic name -> the chain as the user wrote it
        self.stand_ins: Dict[str, str] = {}
        self.notes: List[str] = []

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.stmt) and not isinstance(node, _STATEMENTS):
            raise Refused(f"a `{type(node).__name__}` statement")
        if isinstance(node, ast.expr) and not isinstance(node, _EXPRESSIONS):
            raise Refused(f"a `{type(node).__name__}` expression")
        if not isinstance(node, (ast.stmt, ast.expr, *_PLAIN)):
            raise Refused(f"`{type(node).__name__}`")
        return super().generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, str) and node.value not in STRINGS:
            raise Refused(f"the string {shown(repr(node.value))}, which is not a known argument value")
        if not isinstance(node.value, (str, *_LITERALS)):
            raise Refused(f"the literal {shown(repr(node.value))}")
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        name = node.id
        if name.startswith("_") and name != "_":  # `_` is the usual throw-away target
            raise Refused(f"the name `{name}`")
        if isinstance(node.ctx, ast.Load) and name in self.imports:
            return self._symbol(node, [name])
        return node  # a pure builtin, or a name the snippet binds or the probe stands in for

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        """A string only compared (`"kernel" in v.name`, `mode == "train"`) can reach no function:
        any string may be an operand; everything else is rebuilt as usual."""
        operands = [node.left, *node.comparators]
        if any(isinstance(o, ast.Attribute) and o.attr == "name" for o in operands):
            return self._name_filter(node)
        rebuilt = [o if isinstance(o, ast.Constant) and isinstance(o.value, str) and len(o.value) <= MAX_SHOWN
                   else self.visit(o) for o in operands]
        node.left, node.comparators = rebuilt[0], rebuilt[1:]
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        """`self.params["clip_norm"]`, `config["lr"]` on a name the snippet does not define: a
        stand-in like an unknown attribute (the key is never run)."""
        chain = name_parts(node.value)
        key = node.slice.value if isinstance(node.slice, ast.Constant) else None
        if chain and chain[0] not in self.bound and chain[0] not in self.imports and isinstance(key, str) \
                and key.isidentifier() and not key.startswith("_") and isinstance(node.ctx, ast.Load):
            text = ".".join(chain) + f"[{key!r}]"
            name = stand_in_name(".".join([*chain, key]))
            self.stand_ins[name] = text
            return ast.copy_location(ast.Name(name, ast.Load()), node)
        return self.generic_visit(node)

    def _name_filter(self, node: ast.Compare) -> ast.AST:
        """`"kernel" in v.name`: the stand-in variables have names of their own, so the filter is a
        stand-in that passes every one (a placeholder: the probe cannot then say not-reproduced)."""
        names = [ast.unparse(o) for o in [node.left, *node.comparators] if isinstance(o, ast.Attribute)]
        text = f"a name filter on {shown(names[0])}"  # not the strings it compares: they are the file's text
        name = stand_in_name(f"name_filter_{len(self.stand_ins)}")
        self.stand_ins[name] = text
        return ast.copy_location(ast.Name(name, ast.Load()), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        called = node.func.id if isinstance(node.func, ast.Name) else None
        special = _float_string(node) if called == "float" and called not in self.bound else None
        if special is not None:
            return ast.copy_location(ast.Constant(float(special)), node)
        if called and called not in self.bound and called not in BUILTINS and hasattr(builtins, called):
            raise Refused(f"the builtin `{called}`")
        kept = [kw for kw in node.keywords if kw.arg not in DROPPED_KEYWORDS]
        for dropped in node.keywords:
            if dropped not in kept:
                self.notes.append(f"the `{dropped.arg}=` argument was dropped (it does not change the outcome)")
        node.keywords = kept
        self.generic_visit(node)  # in place
        self._legacy_keywords(node)
        return node

    def _legacy_keywords(self, node: ast.Call) -> None:
        """Keras 2 optimizer arguments Keras 3 refuses: `lr` runs as `learning_rate`, `decay` is dropped."""
        called = self.symbols.get(node.func.id, "") if isinstance(node.func, ast.Name) else ""
        if not called.startswith("keras.optimizers.") or called.startswith("keras.optimizers.legacy."):
            return
        given = {kw.arg for kw in node.keywords}
        for keyword in list(node.keywords):
            if keyword.arg not in LEGACY_OPTIMIZER_KEYWORDS:
                continue
            new = LEGACY_OPTIMIZER_KEYWORDS[keyword.arg]
            if new is None:
                node.keywords.remove(keyword)
                self.notes.append(f"dropped the Keras 2 argument `{keyword.arg}={shown(ast.unparse(keyword.value))}` "
                                  "(Keras 3 refuses it; it does not change the first step)")
            elif new not in given:
                self.notes.append(f"ran the Keras 2 argument `{keyword.arg}=` as `{new}=`")
                keyword.arg = new

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        chain = name_parts(node)
        private = [a for a in (chain or [node.attr]) if a.startswith("_")]
        if private:
            raise Refused(f"the attribute `.{private[0]}`" if private[0] != (chain or [""])[0]
                          else f"the name `{private[0]}`")
        if isinstance(node.ctx, ast.Store):
            return self._store(node, chain)
        if chain and chain[0] in self.imports:
            return self._symbol(node, chain)
        if chain and chain[0] not in self.bound:
            return self._known_chain(node, chain) or self._unknown_chain(node, chain)
        self.generic_visit(node)  # in place; what it is read from first: `os.popen(...).read` names `os.popen`
        if node.attr not in ATTRIBUTES:
            raise Refused(f"the attribute `.{node.attr}`")
        return node

    def _store(self, node: ast.Attribute, chain: Optional[List[str]]) -> ast.AST:
        """Assigning an attribute: only a clip option, learning rate or optimizer, and only on
        what the probe provides (a name the snippet does not define): never on a library object,
        which would change every later probe."""
        if node.attr not in SETTABLE and chain and len(chain) == 2 and chain[0] not in self.imports \
                and chain[0] not in self.bound:  # `self.train_op = ...`: a local stand-in name, nothing mutated
            name = stand_in_name(".".join(chain))
            self.stand_ins[name] = ".".join(chain)
            return ast.copy_location(ast.Name(name, ast.Store()), node)
        if node.attr not in SETTABLE:
            raise Refused(f"assigning the attribute `.{node.attr}`")
        if not chain or chain[0] in self.imports or chain[0] in self.bound:
            raise Refused(f"assigning `.{node.attr}` on `{shown(ast.unparse(node.value))}`")
        node.value = self.visit(node.value)
        return node

    def _symbol(self, node: ast.AST, chain: List[str]) -> ast.AST:
        """An import-rooted chain: the longest allowlisted prefix, then value attributes."""
        root = self.imports[chain[0]]
        for cut in range(len(chain), 0, -1):
            qualified = ".".join([root, *chain[1:cut]])
            target = qualified if allowed(qualified) else migrated(qualified)
            if target:
                rest = chain[cut:]
                refused = [a for a in rest if a not in ATTRIBUTES]
                if refused:
                    raise Refused(f"the attribute `.{refused[0]}` of `{'.'.join(chain[:cut])}`")
                name = symbol_name(target)
                self.symbols[name] = entry(target)
                self.written.setdefault(name, ".".join(chain[:cut]))
                if target != qualified:
                    self._note_migration(chain[:cut], qualified, target)
                elif legacy_backend(qualified):
                    self.notes.append(f"ran `{'.'.join(chain[:cut])}` as the legacy Keras backend's "
                                      f"`{qualified.rpartition('.')[2]}` (tf.keras.backend in Keras 3, "
                                      "tf_keras.backend in tf-keras): Keras 3's keras.backend has no such function")
                return _chain(name, rest, node)
        shown_chain = ".".join(chain)
        qualified = ".".join([root, *chain[1:]])
        return self._refuse_symbol(shown_chain, qualified)

    def _note_migration(self, chain: List[str], qualified: str, target: str) -> None:
        """Every substitution of the migration shim is listed in the verdict's assumptions, in the
        file's own spelling (`tf.log` as `tf.compat.v1.log`)."""
        written, root = ".".join(chain), self.imports[chain[0]]
        if target in SHIM_NOTES:
            self.notes.append(f"ran `{written}` as {SHIM_NOTES[target]}")
            return
        spelled = chain[0] + target[len(root):] if target.startswith(root + ".") else target
        self.notes.append(f"ran `{written}` as `{spelled}` ({entry(qualified)} is not in TF 2)")

    @staticmethod
    def _refuse_symbol(written: str, qualified: str):
        also = f" ({qualified})" if qualified != written else ""
        raise Refused(f"`{shown(written)}`{also}, which is not on the verifier's allowlist")

    def _known_chain(self, node: ast.Attribute, chain: List[str]) -> Optional[ast.AST]:
        """`FLAGS.clipnorm` with a flag default the static analysis read: a stand-in the worker
        binds to that value (the one the finding is about), not to a placeholder."""
        for cut in range(len(chain), 1, -1):
            text = ".".join(chain[:cut])
            if text in self.values:
                name = stand_in_name(text)
                self.stand_ins[name] = text
                return _chain(name, chain[cut:], node)
        return None

    def _unknown_chain(self, node: ast.Attribute, chain: List[str]) -> ast.AST:
        """`args.lr`: allowed attributes stay (the probe binds them); at the first other one the
        chain so far becomes a stand-in."""
        for cut in range(1, len(chain)):
            if chain[cut] not in ATTRIBUTES:
                text = ".".join(chain[:cut + 1])
                name = stand_in_name(text)
                self.stand_ins[name] = text
                return _chain(name, chain[cut + 1:], node)
        return node


def _float_string(call: ast.Call) -> Optional[str]:
    """The string of `float("inf")` (a special value spelled as a string, folded to the number), or None."""
    if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Constant):
        return None
    value = call.args[0].value
    return value if isinstance(value, str) and value.strip().lower() in FLOAT_STRINGS else None


def _chain(name: str, attributes: List[str], like: ast.AST) -> ast.expr:
    built: Union[ast.Name, ast.Attribute] = ast.Name(name, ast.Load())
    for attribute in attributes:
        built = ast.Attribute(built, attribute, ast.Load())
    built.ctx = getattr(like, "ctx", ast.Load())
    return ast.copy_location(built, like)


def _bound_names(tree: ast.AST) -> frozenset:
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))


def rebuild(snippet: dict) -> dict:
    """The snippet rebuilt from its syntax tree, with `symbols` (synthetic name -> allowlisted
    qualified name), `stand_ins` (synthetic name -> the text it replaces) and `notes`.
    Raises Refused naming what is not allowed."""
    try:
        tree = ast.parse(textwrap.dedent(snippet["code"]).strip())
    except (SyntaxError, ValueError):
        raise Refused("a snippet that is not a complete statement on its own") from None
    except (RecursionError, MemoryError):
        raise Refused(f"an expression nested too deeply for Python's parser (the verifier rebuilds at most "
                      f"{MAX_DEPTH} levels)") from None
    depth = tree_depth(tree)
    if depth > MAX_DEPTH:
        raise Refused(f"an expression nested {depth} levels deep (the verifier rebuilds at most {MAX_DEPTH})")
    values = {identifier(text): value for text, value in snippet.get("values", {}).items()
              if _plain_value(value, nested=False)}
    rebuilder = Rebuilder(snippet.get("imports", {}), _bound_names(tree), values)
    tree = ast.fix_missing_locations(rebuilder.visit(tree))
    found = constants(snippet.get("constants", {}))
    known = {name: values[text] for name, text in rebuilder.stand_ins.items() if text in values}
    sources = {identifier(k): str(v)[:MAX_SHOWN] for k, v in snippet.get("sources", {}).items()
               if identifier(k) in found or identifier(k) in values}
    return {"code": ast.unparse(tree), "symbols": rebuilder.symbols, "written": rebuilder.written,
            "stand_ins": rebuilder.stand_ins, "constants": found, "values": known, "sources": sources,
            "notes": rebuilder.notes}


def tree_depth(tree: ast.AST) -> int:
    """The depth of a syntax tree, measured with an explicit stack (no recursion)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def constants(found: dict) -> dict:
    """The file's literal constants a snippet may use: numbers, known strings, and mappings of
    keyword names to those (`**settings`). Any other is left out (the probe stands in for it)."""
    return {identifier(name): value for name, value in found.items()
            if not name.startswith("_") and _plain_value(value, nested=True)}


def _plain_value(value, nested: bool) -> bool:
    if isinstance(value, str):
        return value in STRINGS
    if isinstance(value, dict) and nested:
        return all(isinstance(k, str) and k.isidentifier() and not k.startswith("_") and _plain_value(v, False)
                   for k, v in value.items())
    return isinstance(value, _LITERALS)


def check_worker_code(code: str, known: Tuple[str, ...]) -> Optional[str]:
    """The worker's own re-check of a rebuilt snippet: no underscore attribute, and no underscore
    name but the synthetic ones it was given."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return f"the attribute `.{node.attr}`"
        if isinstance(node, ast.Name) and node.id.startswith("_") and node.id not in (*known, "_"):
            return f"the name `{node.id}`"
    return None
