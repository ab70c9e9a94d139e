"""What a one-file run (pre-commit) costs in a project of 1,000 modules, against the same file alone.

    python bench/project.py [--modules 1000] [--runs 5]

Generates a `src/` layout package of `--modules` modules in 20 subpackages (each module imports
two others, relatively and absolutely, some build softmax models or clip gradients, one holds
the constants every training script star-imports) and a training script importing five of them.
Prints the CPU seconds (user + system, medians of interleaved runs) of `cliplint FILE` cold
(`--no-cache`) and warm (a filled cache), in the project and for the same file copied alone into
an empty folder (its imports then resolve to nothing: the work of a run before issue 28).
Issue 28's target: warm in the project at most 2x warm alone.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

from one_file import cpu  # bench/ is this script's folder: on sys.path

PACKAGES = 20
BUILDER = '''import tensorflow as tf

from .{sibling} import helper_{sibling}
from proj.{other_pkg}.{other} import value_{other}


def build_{name}(classes):
    """A classifier."""
    return tf.keras.Sequential([tf.keras.layers.Dense(classes, activation="softmax")])


def helper_{name}(x):
    return helper_{sibling}(x) + value_{other}(x)


def value_{name}(x):
    return x * 2
'''
TRAIN = '''import tensorflow as tf

from proj.config import *
from proj.pkg00.mod0000 import build_mod0000
from proj.pkg01 import mod0001
from proj.pkg02.mod0002 import helper_mod0002
from proj.pkg03.mod0003 import value_mod0003
from proj.pkg04.mod0004 import build_mod0004

model = build_mod0000(10)
model.compile(optimizer=tf.keras.optimizers.SGD(LEARNING_RATE, clipnorm=CLIP_NORM),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
other = mod0001.build_mod0001(3)
scaled = helper_mod0002(value_mod0003(1.0))
'''


def generate(root: Path, modules: int) -> Path:
    """The project under `root`; the training script's path."""
    package = root / "src" / "proj"
    package.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "proj"\n')
    (package / "__init__.py").write_text("")
    (package / "config.py").write_text("CLIP_NORM = 1.0\nLEARNING_RATE = 1e-3\n")
    for number in range(modules):
        pkg = f"pkg{number % PACKAGES:02d}"
        (package / pkg).mkdir(exist_ok=True)
        (package / pkg / "__init__.py").touch()
        sibling = f"mod{(number + PACKAGES) % modules:04d}"  # the same subpackage (modules: a multiple of 20)
        other = (number * 7 + 3) % modules
        (package / pkg / f"mod{number:04d}.py").write_text(BUILDER.format(
            name=f"mod{number:04d}", sibling=sibling, other_pkg=f"pkg{other % PACKAGES:02d}", other=f"mod{other:04d}"))
    train = root / "src" / "train.py"
    train.write_text(TRAIN)
    return train


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cliplint = [sys.executable, "-m", "cliplint"]
    with tempfile.TemporaryDirectory() as folder:
        project, alone = Path(folder, "project"), Path(folder, "alone")
        train = generate(project, args.modules)
        alone.mkdir()
        shutil.copy(train, alone / "train.py")
        places = {"in the project": (project, "src/train.py"), "alone": (alone, "train.py")}
        times: Dict[str, List[float]] = {f"{mode} {where}": [] for where in places for mode in ("cold", "warm")}
        for where, (cwd, name) in places.items():
            cpu(cliplint + [name], str(cwd))  # fills the cache for the warm runs
        for _ in range(args.runs):
            for where, (cwd, name) in places.items():
                times[f"cold {where}"].append(cpu(cliplint + ["--no-cache", name], str(cwd)))
                times[f"warm {where}"].append(cpu(cliplint + [name], str(cwd)))
    medians = {label: statistics.median(values) for label, values in times.items()}
    for label, value in medians.items():
        print(f"{label:24} {value:.3f} s CPU")
    print(f"warm in the project / warm alone = {medians['warm in the project'] / medians['warm alone']:.2f} "
          f"(target <= 2); cold: {medians['cold in the project'] / medians['cold alone']:.2f} "
          f"({args.modules} modules, median of {args.runs})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
