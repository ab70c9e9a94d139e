"""One Python source text to findings: the prefilter, the ast gate, the reduced parse, the rules.

Parsing with libcst (`analysis.py`) is imported only when some rule could fire in the text:
most files of a tree never pay for it.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Sequence, Tuple

from .files import decode_python
from .findings import Finding, bad_input, syntax_error

if TYPE_CHECKING:
    from .facts import Facts
    from .project.session import Imported


def prefilter(data: bytes, rules: Sequence) -> bool:
    """True when some enabled rule's marker token occurs in the raw bytes."""
    return any(token in data for rule in rules for token in rule.tokens)


def lint_bytes(path: str, data: bytes, rules: Sequence, display: Optional[str] = None
               ) -> Tuple[List[Finding], bool]:
    display = display or path
    found = untouched(data, [token for rule in rules for token in rule.tokens], display)
    if found is not None and not linked_to_project(path, data):
        return found, False
    text, failure = decode_python(display, data)
    if failure:
        return [failure], False
    return lint_text(path, text, rules, display)


def untouched(data: bytes, tokens: Sequence[bytes], display: str) -> Optional[List[Finding]]:
    """The findings of Python source none of the enabled rules' `tokens` occurs in, found
    without the rules (None when one occurs): an undecodable or binary file is still reported
    (the user asked for it to be linted), and so is a syntax error in a file some rule could
    fire on, whichever are selected: `--select` must not hide it (CPython's parser only)."""
    if any(token in data for token in tokens):
        return None
    from .catalogue import any_rule_tokens

    text, failure = decode_python(display, data)
    if failure is None and any(token in data for token in any_rule_tokens()):
        failure = unparsable(text, display)
    return [failure] if failure else []


def unparsable(text: str, display: str) -> Optional[Finding]:
    """CL000 for a text CPython cannot parse, found without libcst (ruff reports every syntax
    error too). Compiled under a name that is no file, so CPython does not read the disk."""
    try:
        compile(text, "<cliplint>", "exec", dont_inherit=True, flags=PYCF_ONLY_AST)
    except SyntaxError as err:
        return syntax_error(display, err.msg, err.lineno or 1, max(err.offset or 1, 1))
    except (RecursionError, MemoryError, ValueError):
        pass  # the full linter's assessment reports these when a rule could fire
    return None


PYCF_ONLY_AST = 0x400  # ast.PyCF_ONLY_AST, without importing ast for a file no rule could fire on


def lint_text(path: str, text: str, rules: Sequence, display: str) -> Tuple[List[Finding], bool]:
    """Python source (a file, or a notebook's cells as one program): the ast gate, the reduced
    parse, then the rules. The cycle collector waits until the file is done: its trees (~10^5
    acyclic nodes) are freed by reference counting, and a collection while they live scans every
    node and promotes it, to be scanned again (measured on keras/src: a sixth of a cold run)."""
    with paused_gc():
        return _lint_text(path, text, rules, display)


def _lint_text(path: str, text: str, rules: Sequence, display: str) -> Tuple[List[Finding], bool]:
    from .facts import Facts  # CPython's ast: imported only when a file passes the prefilter
    from .trees import cpython_tree

    tree = cpython_tree(text)  # the ast gate's; its walk also measures the nesting gate's depth
    if tree is None:
        read = _as_python3(path, text, rules, display)
        if read is not None:
            return read
    facts = Facts(tree) if tree is not None else None  # iterative: any depth
    imported = _imported(path, tree)
    if imported is not None and facts is not None:  # what a helper holds counts as the file's for the gate
        from .project.session import add_gate_facts

        add_gate_facts(facts, imported)
    rules = gate(facts, rules)
    if not rules:
        return [], False
    lines = None
    if facts is not None:
        words = {token.decode() for rule in rules for token in (*rule.tokens, *rule.context_tokens)}
        if imported is not None:  # a definition using an imported helper may be what a rule follows
            words |= imported.names
        from .reduction import reduced

        text, lines = reduced(facts, text, sorted(words))
    from .analysis import lint_module  # libcst is imported only when a file is parsed
    from .limits import assess

    # measured on the original text: nested as deep as the reduced one at least
    refused, risky = assess(text, facts.nesting if facts is not None else None)
    if refused is not None:
        return [replace(refused, path=display)], False
    with _linking(imported):
        if not risky:
            return lint_module(path, text, rules, display, lines, gated=True)
        result, died = contained(lint_module, path, text, rules, display, lines, True)
    return (died_parsing(display, died), False) if died else result


def _as_python3(path: str, text: str, rules: Sequence, display: str) -> Optional[Tuple[List[Finding], bool]]:
    """A Python 2 file (`print x`, `except E, e:`) linted as the Python 3 it is otherwise
    (`python2.readable`), with its syntax error still reported: it does not run on Python 3.
    No fix is offered: the text analysed is not the file's."""
    from .python2 import readable

    found = readable(text)
    error = unparsable(text, display)
    if found is None or error is None:
        return None
    rewritten, lines = found
    findings, crashed = _lint_text(path, rewritten, rules, display)
    shown = ", ".join(map(str, lines[:5])) + (", ..." if len(lines) > 5 else "")
    error = replace(error, message=f"{error.message} (Python 2: line{'s' if len(lines) > 1 else ''} {shown} "
                                   f"read as Python 3, the rest linted)")
    return [error, *(replace(f, fix=None) for f in findings if f.code != error.code)], crashed


def linked_to_project(path: str, data: bytes) -> bool:
    """Is the file imported by its project's modules, or does it import one? Either may give it
    what a rule reports (`losses.ce(model(x), y)` for a file holding only the log; a log of what
    an imported `make_policy` returns). The byte prefilter then cannot skip it: the gate
    decides, with the linked code (`project.session.add_gate_facts`)."""
    from .project.importers import imports_project
    from .project.session import CURRENT

    reading = CURRENT.get()
    return reading is not None and (bool(reading.importers(path)) or imports_project(path, data, reading.src))


def _imported(path: str, tree) -> Optional["Imported"]:
    """The summaries of the project's modules `tree` imports, when a run follows them."""
    from .project.session import CURRENT

    reading = CURRENT.get()
    return reading.prepare(path, tree) if reading is not None and tree is not None else None


@contextmanager
def _linking(imported: Optional["Imported"]) -> Iterator[None]:
    """While the module is analysed, its dataflow reads the summaries it imports too."""
    if imported is None:
        yield
        return
    from .flow.local import LINK
    from .project.link import link

    token = LINK.set(lambda ctx: link(ctx, imported))
    try:
        yield
    finally:
        LINK.reset(token)


def died_parsing(display: str, how: str) -> List[Finding]:
    return [bad_input(display, f"could not be analysed: the parser crashed ({how})")]


def contained(function: Callable, *args) -> Tuple[Any, Optional[str]]:
    """`function(*args)` in a child process, and None; or None and how the child died (a native
    crash of the parser is a signal, which would have killed this process)."""
    import multiprocessing
    import threading

    # A fork is cheap, but a fork of a process with threads (an editor server) could deadlock.
    forking = threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork") if forking else multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_send_result, args=(sender, function, args))
    child.start()
    sender.close()
    try:
        result = receiver.recv()
    except EOFError:  # the child died before it could answer
        result = None
    finally:
        receiver.close()
        child.join()
    status = child.exitcode or 0  # joined: it has one
    if status == 0:
        return result, None
    if status < 0:
        return None, f"signal {-status}"
    return None, f"exit status {status}"


def _send_result(sender, function: Callable, args: tuple) -> None:
    sender.send(function(*args))
    sender.close()


def facts_of(text: str) -> Optional["Facts"]:
    """CPython-ast facts about `text` (None when CPython cannot parse it)."""
    from .facts import Facts  # CPython's ast: imported only when a file passes the prefilter

    with paused_gc():
        return Facts.of(text)


@contextmanager
def paused_gc() -> Iterator[None]:
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def gate(facts: Optional["Facts"], rules: Sequence) -> Sequence:
    """The rules that could fire, judged from the facts (all of them when CPython could not
    parse the text: the CST parser then reports why)."""
    if facts is None:
        return rules
    try:
        return [rule for rule in rules if rule.could_fire(facts)]
    except RecursionError:  # a rule's question recursed through a deep tree: the nesting gate decides
        return rules
