"""The house rules of the code base: no import cycle, and a rule is one new file.

`test_a_new_rule_is_one_new_file` follows CONTRIBUTING.md's "Add a rule" recipe on a copy of
the package: it adds one module under `cliplint/rules/` and nothing else, and the rule is then
discovered, selectable, documented and its examples run.
"""
import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cliplint"


def _imports(path: Path, module: str, is_package: bool):
    """Every cliplint module `path` imports, at module level or inside functions."""
    here = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = here
                for _ in range(node.level - 1):
                    parent = parent.rpartition(".")[0]
                base = f"{parent}.{base}" if base else parent
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph():
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)

    def resolve(name):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, (path, is_package) in modules.items():
        targets = {resolve(name) for name in _imports(path, module, is_package) if name.startswith("cliplint")}
        graph[module] = targets - {module, ""}
    return graph


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_at_module_or_function_level():
    graph = import_graph()
    assert len(graph) > 20
    assert cycles(graph) == []


def test_the_cycle_check_sees_function_level_imports():
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert cycles(graph) == [["a", "b"]]


def test_findings_is_a_leaf():
    assert import_graph()["cliplint.findings"] == set()


THROWAWAY_RULE = '''
"""CL099 print-in-train-step: a rule written by following CONTRIBUTING.md."""
from __future__ import annotations

from typing import Iterator

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import Report
from . import Invalid, Rule


class PrintInTrainStep(Rule):
    code = "CL099"
    name = "print-in-train-step"
    summary = "`print` inside a function named `train_step` runs only while tracing."
    severity = "warning"
    tokens = (b"train_step",)
    why = """
        Python's `print` runs when a `tf.function` is traced, not at every step.
    """
    example = """
        def train_step(x):
            print(x)
    """
    instead = """
        def train_step(x):
            tf.print(x)
    """
    VALID = [
        "def train_step(x):\\n    tf.print(x)\\n",
        "def evaluate(x):\\n    print(x)\\n",
        "def train_step(x):\\n    log.print(x)\\n",
    ]
    INVALID = [
        Invalid("def train_step(x):\\n    print(x)\\n", 2),
        Invalid("def train_step(x, y):\\n    y = x\\n    print(y)\\n", 3),
        Invalid("class M:\\n    def train_step(self, x):\\n        print(x)\\n", 3, "tracing"),
    ]

    def could_fire(self, facts: Facts) -> bool:
        return facts.has("print")

    def check(self, ctx: Context) -> Iterator[Report]:
        for function in ctx.nodes(cst.FunctionDef):
            if function.name.value != "train_step":
                continue
            for call in ctx.nodes(cst.Call):
                if isinstance(call.func, cst.Name) and call.func.value == "print" and ctx.encloses(function, call):
                    yield Report(call, "`print` in `train_step` runs only while tracing; use `tf.print`.")
'''

CHECK_EXAMPLES = """
import textwrap
from cliplint.analysis import lint_module
from cliplint.lint import facts_of, gate
from cliplint.rules import ALL_RULES
rule = ALL_RULES["CL099"]
rules = list(ALL_RULES.values())
for source in rule.VALID:
    assert not [f for f in lint_module("v.py", textwrap.dedent(source), rules)[0] if f.code == "CL099"], source
for case in rule.INVALID:
    found = [f for f in lint_module("i.py", textwrap.dedent(case.source), rules)[0] if f.code == "CL099"]
    assert [f.line for f in found] == [case.line], (case.source, found)
    assert case.contains is None or case.contains in found[0].message
    assert gate(facts_of(textwrap.dedent(case.source)), [rule]) == [rule], case.source
print("examples ok")
"""


def test_a_new_rule_is_one_new_file(tmp_path):
    copy = tmp_path / "cliplint"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "rules" / "print_in_train_step.py").write_text(textwrap.dedent(THROWAWAY_RULE).lstrip())
    (tmp_path / "train.py").write_text("import tensorflow as tf\n\ndef train_step(x):\n    print(x)\n")
    environment = {**os.environ, "PYTHONPATH": str(tmp_path), "NO_COLOR": "1"}

    def run(*args):
        return subprocess.run([sys.executable, *args], cwd=tmp_path, env=environment, capture_output=True,
                              text=True, timeout=300)

    selected = run("-m", "cliplint", "--select", "CL099", "--no-cache", "--output-format", "json", "train.py")
    assert selected.returncode == 1, selected.stderr
    assert [(f["code"], f["line"], f["severity"]) for f in json.loads(selected.stdout)] == [("CL099", 4, "warning")]
    by_name = run("-m", "cliplint", "--select", "print-in-train-step", "--no-cache", "train.py")
    assert "train.py:4:5: CL099" in by_name.stdout, by_name.stdout + by_name.stderr
    listed = run("-m", "cliplint", "rules")
    assert "CL099  print-in-train-step" in listed.stdout
    explained = run("-m", "cliplint", "explain", "CL099")
    assert "## Why is this bad?" in explained.stdout and "tf.print(x)" in explained.stdout
    page = run("-c", "from cliplint.docs import pages; print(pages()['CL099.md'])")
    assert page.stdout.startswith("# CL099 print-in-train-step"), page.stderr
    examples = run("-c", CHECK_EXAMPLES)
    assert examples.stdout.strip() == "examples ok", examples.stderr


def test_ruff_finds_nothing():
    """The lint configuration in pyproject.toml (line length, pyflakes, import order) holds."""
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=PACKAGE.parent,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
