"""The long fuzz run: the property-based tests of tests/test_robustness.py with many examples.

    python bench/fuzz.py [--examples 5000] [--random]

Every generated program is linted twice with every rule; a crash, a non-deterministic result,
a finding outside the file, or a different result through the engine's prefilter, ast gate and
reduced parse fails the run, and hypothesis prints the smallest input that does it.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=5000, help="per property")
    parser.add_argument("--random", action="store_true", help="a new random seed instead of the fixed one")
    args = parser.parse_args()
    env = {**os.environ, "CLIPLINT_FUZZ_EXAMPLES": str(args.examples)}
    if args.random:
        env["CLIPLINT_FUZZ_RANDOM"] = "1"
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "--hypothesis-show-statistics", str(ROOT / "tests" / "test_robustness.py"),
                             "-k", "never or changes_nothing"], cwd=ROOT, env=env)
    print(f"{args.examples} generated inputs per property in {time.perf_counter() - started:.0f} s")
    sys.exit(result.returncode)
