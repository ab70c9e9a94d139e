"""Where libcst's native parser dies, and that cliplint never does.

    python bench/fuzz_parser.py            # every construct x size through `cliplint`: no crash
    python bench/fuzz_parser.py --limits   # bisect the size at which libcst (and CPython) fail
    python bench/fuzz_parser.py --mixed N  # N random mixtures of the constructs (Hypothesis)

Each input runs in a subprocess, so a segfault shows as a signal. `--limits` is the evidence
behind limits.MAX_DEPTH; the default mode is what tests/test_parser_limits.py samples in CI.
It takes minutes (libcst's time grows with the square of the nesting): run it once.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

# Each construct: size -> a Python statement (or statements) nesting `size` times.
CONSTRUCTS: Dict[str, Callable[[int], str]] = {
    "unary minus": lambda n: "x = " + "-" * n + "1\n",
    "unary invert": lambda n: "x = " + "~" * n + "1\n",
    "unary plus, spaced": lambda n: "x = " + "+ " * n + "1\n",
    "not": lambda n: "x = " + "not " * n + "a\n",
    "lambda": lambda n: "x = " + "lambda: " * n + "1\n",
    "await": lambda n: "async def f():\n    x = " + "await " * n + "a\n",
    "sum": lambda n: "x = " + " + ".join(["a"] * n) + "\n",
    "power": lambda n: "x = " + " ** ".join(["a"] * n) + "\n",
    "and": lambda n: "x = " + " and ".join(["a"] * n) + "\n",
    "comparison": lambda n: "x = " + " < ".join(["a"] * n) + "\n",
    "attribute chain": lambda n: "x = a" + ".b" * n + "\n",
    "call chain": lambda n: "x = a" + "()" * n + "\n",
    "subscript chain": lambda n: "x = a" + "[0]" * n + "\n",
    "nested calls": lambda n: "x = " + "f(" * n + ")" * n + "\n",
    "nested subscripts": lambda n: "x = " + "a[" * n + "0" + "]" * n + "\n",
    "nested lists": lambda n: "x = " + "[" * n + "]" * n + "\n",
    "nested comprehensions": lambda n: "x = " + "[a for a in " * n + "b" + "]" * n + "\n",
    "conditional expressions": lambda n: "x = " + "a if b else " * n + "c\n",
    "string concatenation": lambda n: "x = " + "'a' " * n + "\n",
    "f-string concatenation": lambda n: "x = " + "f'{a}' " * n + "\n",
    "nested f-strings": lambda n: "x = " + "f'{" * n + "a" + "}'" * n + "\n",
    "continued sum": lambda n: "x = 1 \\\n" + "+ 1 \\\n" * n + "\n",
    "continued unary minus": lambda n: "x = " + "- \\\n" * n + "1\n",
    "flat list": lambda n: "x = [" + "1, " * n + "]\n",
    "flat tuple": lambda n: "x = " + "1, " * n + "\n",
    "commas": lambda n: "x = [" + "," * n + "]\n",
    "elif chain": lambda n: "if a:\n    pass\n" + "elif a:\n    pass\n" * n,
    "nested blocks": lambda n: "".join(" " * i + "if a:\n" for i in range(n)) + " " * n + "pass\n",
    "decorators": lambda n: "@d\n" * n + "def f():\n    pass\n",
    "nested defs": lambda n: "".join(" " * i + "def f():\n" for i in range(n)) + " " * n + "pass\n",
    "statements": lambda n: "x = 1\n" * n,
    "arguments": lambda n: "f(" + "a, " * n + ")\n",
    "walrus": lambda n: "x = " + "(a := " * n + "1" + ")" * n + "\n",
    "starred": lambda n: "x = [" + "*" * n + "a]\n",
}
# A statement the rules fire on, so that cliplint parses the file with libcst.
HEADER = "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n"
SIZES = (10, 100, 1_000, 10_000, 100_000)
MAX_TEXT = 10_000_000  # characters: cliplint's default max-file-size

_LIBCST = """import sys, libcst as cst
cst.parse_module(sys.stdin.read(), cst.PartialParserConfig(python_version=cst.KNOWN_PYTHON_VERSION_STRINGS[-1]))"""
_CPYTHON = "import sys; compile(sys.stdin.read(), '<fuzz>', 'exec')"


def outcome(program: str, text: str, timeout: float) -> str:
    """'ok', 'raises <Error>', 'signal N' or 'timeout' for `program` reading `text`."""
    try:
        done = subprocess.run([sys.executable, "-c", program], input=text.encode(), capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout"
    if done.returncode < 0:
        return f"signal {-done.returncode}"
    if done.returncode:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
        return "raises " + last.split(":")[0]
    return "ok"


def first_failure(construct: str, program: str, timeout: float) -> Tuple[Optional[int], str]:
    """The smallest size (to within 5%) at which `program` crashes or times out on the
    construct, and how; (None, '') when it survives every size up to MAX_TEXT."""
    make = CONSTRUCTS[construct]
    good, bad, how = 0, None, ""
    size = 256
    while bad is None and len(make(size)) <= MAX_TEXT:
        result = outcome(program, make(size), timeout)
        if result.startswith(("signal", "timeout")):
            bad, how = size, result
        else:
            good, size = size, size * 2
    while bad is not None and bad - good > max(bad // 20, 1):
        middle = (good + bad) // 2
        result = outcome(program, make(middle), timeout)
        if result.startswith(("signal", "timeout")):
            bad, how = middle, result
        else:
            good = middle
    return bad, how


def limits(timeout: float) -> None:
    print(f"{'construct':26} {'libcst dies at':>16} {'how':10} {'CPython fails at':>16}")
    for construct in CONSTRUCTS:
        size, how = first_failure(construct, _LIBCST, timeout)
        cpython = next((n for n in (250, 500, 1000, 2000, 4000, 8000, 16000)
                        if outcome(_CPYTHON, CONSTRUCTS[construct](n), timeout) != "ok"), None)
        print(f"{construct:26} {size if size else '-':>16} {how:10} {cpython if cpython else '-':>16}", flush=True)


def lint(texts: Dict[str, str], folder: Path, timeout: float = 600) -> Dict[str, List[dict]]:
    """Every text as a file of one `cliplint` run: its records by file name. Raises when
    cliplint dies (a signal), exits with an internal error (2) or prints a traceback."""
    for name, text in texts.items():
        (folder / name).write_text(HEADER + text)
    done = subprocess.run([sys.executable, "-m", "cliplint", "--no-cache", "--isolated", "--output-format", "json",
                           *texts], cwd=folder, capture_output=True, timeout=timeout)
    if done.returncode not in (0, 1) or b"Traceback" in done.stderr:
        raise AssertionError(f"cliplint exited with {done.returncode}: {done.stderr.decode()[-2000:]}")
    records: Dict[str, List[dict]] = {name: [] for name in texts}
    for record in json.loads(done.stdout):
        records[record["path"]].append(record)
    return records


def matrix(sizes: Iterable[int] = SIZES) -> Dict[str, str]:
    return {f"{index:02}_{size}.py": CONSTRUCTS[construct](size)
            for index, construct in enumerate(CONSTRUCTS) for size in sizes
            if len(CONSTRUCTS[construct](size)) <= MAX_TEXT}


def mixture(wrappers: List[Tuple[str, int]]) -> str:
    """An expression nesting each (wrapper, times) in turn, built without recursion."""
    expression = "a"
    for wrapper, times in wrappers:
        for _ in range(times):
            expression = wrapper.format(expression)
    return f"x = {expression}\n"


WRAPPERS = ["-{}", "~{}", "not {}", "lambda: {}", "{}.b", "{}[0]", "f({})", "({})", "[{}]", "{} + a", "a * {}",
            "{} if a else b", "a if {} else b", "{} and a", "a or {}", "{}()", "[{} for a in b]", "{{a: {}}}",
            "f(x={})", "a[{}:1]", "(yield {})", "{} ** a"]


def check(texts: Dict[str, str]) -> int:
    """Lint `texts`; print every file that got neither findings nor a CL000; the count of them."""
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        records = lint(texts, Path(folder))
        took = time.perf_counter() - started
    silent = [name for name, found in records.items() if not found]
    refused = sum(any(r["code"] == "CL000" for r in found) for found in records.values())
    print(f"{len(texts)} files in {took:.1f} s: {refused} refused (CL000), {len(texts) - refused - len(silent)} "
          f"linted, {len(silent)} with nothing to say{': ' + ', '.join(silent) if silent else ''}")
    return len(silent)


def mixtures(count: int) -> Dict[str, str]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    found: List[str] = []

    @settings(max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(st.sampled_from(WRAPPERS), st.integers(1, 3000)), min_size=1, max_size=6))
    def collect(wrappers):
        text = mixture(wrappers)
        if len(text) <= MAX_TEXT:
            found.append(text)

    collect()
    return {f"mix_{index:04}.py": text for index, text in enumerate(found)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limits", action="store_true", help="bisect where libcst and CPython fail")
    parser.add_argument("--mixed", type=int, metavar="N", help="lint N random mixtures of the constructs")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per libcst parse in --limits")
    options = parser.parse_args()
    if options.limits:
        limits(options.timeout)
        return 0
    silent = check(mixtures(options.mixed) if options.mixed else matrix())
    return 1 if silent else 0


if __name__ == "__main__":
    sys.exit(main())
