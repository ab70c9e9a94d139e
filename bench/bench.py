"""cliplint's speed against its anchors, side by side in one run, on one reproducible corpus.

    python bench/bench.py                 # 2,000 files (~380k lines); Fixit alone takes minutes
    python bench/bench.py --files 300     # a quicker look
    python bench/bench.py --no-keras      # only the generated corpus

It (1) generates the corpus (bench/corpus.py) and copies the installed Keras' `keras/src` as a
second, real corpus, (2) makes a bench virtualenv (bench/.venv) with
this cliplint, Fixit and ruff installed by pip, unless --python names an interpreter that has
them, and (3) times cliplint cold and warm, libcst's parser alone, `fixit lint` with its default
rules and `ruff check`, printing wall time, files/s, peak memory and the ratios. Sub-second
runs (warm cliplint and warm ruff, interleaved; one file; importing libcst) are medians of
repeated runs. Speed is never asserted in the test suite: a benchmark is a measurement,
compared within one run.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PARSE_ONLY = """
import gc, sys, pathlib, libcst
gc.disable()
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
    libcst.parse_module(path.read_bytes())
"""


FLOOR = "python -c 'import libcst' (the floor of a one-file run)"


def bench_python(args) -> Path:
    if args.python:
        return Path(args.python)
    venv = HERE / ".venv"
    python = venv / "bin" / "python"
    if not python.exists():
        print("creating the bench virtualenv (bench/.venv): cliplint, fixit, ruff ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", str(ROOT), "fixit", "ruff"], check=True)
    # Always the cliplint of this checkout, not the one the virtualenv was made with.
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(ROOT)], check=True)
    return python


def measure(command, cwd=None, env=None):
    """(wall seconds, peak RSS in MB) of one run of `command`, its children included."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    return wall, usage.ru_maxrss / 1024


def tool(python: Path, name: str) -> str:
    return str(python.parent / name)


def keras_source(out: Path) -> int:
    """A copy of the installed Keras' own source tree (`keras/src`, found from the interpreter
    running this script, which need not be the bench one): real code full of `softmax` and
    `clipnorm` tokens. Copied outside any git repository, like the generated corpus."""
    spec = importlib.util.find_spec("keras")
    if spec is None or spec.origin is None:
        raise SystemExit("Keras is not installed for this interpreter: use --no-keras")
    found = os.path.dirname(spec.origin)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(Path(found) / "src", out, ignore=shutil.ignore_patterns("__pycache__"))
    return sum(1 for _ in out.rglob("*.py"))


def measure_corpus(python: Path, corpus: Path, files: int, args, env) -> dict:
    """cliplint cold and warm, libcst's parser alone, Fixit and ruff on one corpus; the rows printed."""
    cache = Path(tempfile.mkdtemp(prefix="cliplint-bench-cache-"))
    cliplint = [tool(python, "cliplint"), "--exit-zero", "--quiet"]
    rows = []

    def run(label, command, **kwargs):
        wall, rss = measure(command, **kwargs)
        rows.append((label, wall, rss))
        print(f"  {label:<38} {wall:8.2f} s  {rss:7.0f} MB", flush=True)
        return wall

    def run_warm(commands, rounds=7):
        """Sub-second runs, interleaved and repeated: the median of each (one run is noise)."""
        walls = {label: [] for label, _, _ in commands}
        peaks = {label: 0.0 for label, _, _ in commands}
        for _ in range(rounds):
            for label, command, kwargs in commands:
                wall, rss = measure(command, **kwargs)
                walls[label].append(wall)
                peaks[label] = max(peaks[label], rss)
        for label, _, _ in commands:
            rows.append((label, statistics.median(walls[label]), peaks[label]))
            print(f"  {label:<38} {statistics.median(walls[label]):8.2f} s  {peaks[label]:7.0f} MB"
                  f"  (median of {rounds})", flush=True)

    run("cliplint cold (no cache)", cliplint + ["--no-cache", str(corpus)], env=env)
    run("cliplint cold, 1 process", cliplint + ["--no-cache", "-j", "1", str(corpus)], env=env)
    run("cliplint filling the cache", cliplint + ["--cache-dir", str(cache), str(corpus)], env=env)
    run("libcst parse alone (1 process)", [str(python), "-c", PARSE_ONLY, str(corpus)])
    if not args.skip_fixit:
        run("fixit lint (default rules)", [tool(python, "fixit"), "lint", str(corpus)], env=env)
    run("ruff check (no cache)", [tool(python, "ruff"), "check", "--no-cache", "--exit-zero", "-q", str(corpus)])
    ruff_cache = Path(tempfile.mkdtemp(prefix="ruff-bench-cache-"))
    ruff = [tool(python, "ruff"), "check", "--cache-dir", str(ruff_cache), "--exit-zero", "-q", str(corpus)]
    run("ruff check (filling its cache)", ruff)
    run_warm([("cliplint warm (cache)", cliplint + ["--cache-dir", str(cache), str(corpus)], {"env": env}),
              ("ruff check (warm cache)", ruff, {})])
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(ruff_cache, ignore_errors=True)

    times = {label: wall for label, wall, _ in rows}
    print("\n| run | wall s | files/s | peak MB |\n|---|---:|---:|---:|")
    for label, wall, rss in rows:
        print(f"| {label} | {wall:.2f} | {files / wall:,.0f} | {rss:.0f} |")
    cold, warm = times["cliplint cold (no cache)"], times["cliplint warm (cache)"]
    print()
    if "fixit lint (default rules)" in times:
        print(f"cliplint cold is {times['fixit lint (default rules)'] / cold:.1f}x faster than Fixit (target >= 30x)")
    print(f"cliplint warm / ruff warm = {warm / times['ruff check (warm cache)']:.2f} (target <= 1); "
          f"cliplint warm / ruff cold = {warm / times['ruff check (no cache)']:.2f}")
    parse = times["libcst parse alone (1 process)"]
    print(f"cliplint cold / libcst parse alone = {cold / parse:.2f} (target <= 0.3 on keras/src); "
          f"1 process: {times['cliplint cold, 1 process'] / parse:.2f}\n", flush=True)
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--python", help="an interpreter that already has cliplint, fixit and ruff")
    parser.add_argument("--skip-fixit", action="store_true", help="Fixit takes minutes on the full corpus")
    parser.add_argument("--no-keras", action="store_true", help="skip the second corpus, Keras' own keras/src")
    args = parser.parse_args()

    sys.path.insert(0, str(HERE))
    from corpus import generate

    # Outside any git repository: Fixit and ruff skip what a .gitignore above them ignores.
    corpus = Path(tempfile.gettempdir()) / "cliplint-bench-corpus"
    lines = generate(args.files, corpus)
    python = bench_python(args)
    env = {**os.environ, "NO_COLOR": "1"}
    print(f"corpus: {args.files} files, {lines:,} lines; {os.cpu_count()} cores; interpreter {python}\n", flush=True)
    measure_corpus(python, corpus, args.files, args, env)
    if not args.no_keras:
        keras_copy = Path(tempfile.gettempdir()) / "cliplint-bench-keras-src"
        files = keras_source(keras_copy)
        print(f"second corpus: keras/src of the installed Keras, {files} files\n", flush=True)
        measure_corpus(python, keras_copy, files, args, env)

    cliplint = [tool(python, "cliplint"), "--exit-zero", "--quiet"]
    single = ROOT / "fixtures" / "keras_fit_mnist.py"
    singles = [measure(cliplint + ["--no-cache", str(single)], env=env)[0] for _ in range(11)]
    # The floor of that: any libcst-based linter imports libcst before it can parse a file.
    imports = [measure([str(python), "-c", "import libcst"])[0] for _ in range(11)]
    print(f"one training file, cold, interpreter start included: median {statistics.median(singles):.2f} s "
          f"of 11 (target < 0.5 s); importing libcst alone ({FLOOR}): {statistics.median(imports):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
