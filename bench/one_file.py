"""The cost of a pre-commit run on one file no rule could fire on, against `import click`.

    python bench/one_file.py [--runs 9]

CPU seconds (user + system) of `cliplint --no-cache plain.py` and of `python -c "import click"`
with the same interpreter, medians of interleaved runs, and their ratio (issue 29: at most 3x).
"""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def cpu(command, cwd: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "plain.py").write_text("import os\n\n\ndef total(xs):\n    return sum(xs)\n" * 40)
        click, cliplint = [], []
        for _ in range(runs):
            click.append(cpu([sys.executable, "-c", "import click"], folder))
            cliplint.append(cpu([sys.executable, "-m", "cliplint", "--no-cache", "plain.py"], folder))
    reference, measured = statistics.median(click), statistics.median(cliplint)
    print(f"import click: {reference:.3f} s CPU; cliplint on one plain file: {measured:.3f} s CPU "
          f"(median of {runs}); ratio {measured / reference:.2f} (target <= 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
