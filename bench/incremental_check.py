"""The language server's incremental linting against the command line's, on a tree of real code.

    python bench/incremental_check.py DIR [--edits 5] [--seed 0]

For each `.py` file under DIR: the findings of `incremental.Document` on the file as opened,
then after each of `--edits` edits (a line typed, deleted or changed at a random place; each
next edit starts from the last text that parsed), must equal `lint_text`'s on the same text, and
the document's module must be a parse of the whole text. Prints every difference and a summary:
files, versions checked, how many were re-parsed in part, how many differ.
"""
from __future__ import annotations

import argparse
import random
import sys
import warnings
from pathlib import Path

import libcst as cst

from cliplint.incremental import Document
from cliplint.lint import lint_text
from cliplint.rules import ALL_RULES

RULES = list(ALL_RULES.values())
TYPED = ["{i}x = 1\n", "{i}# note\n", "\n", "{i}loss = tf.math.log(tf.nn.softmax(y))\n", "{i}if a:\n{i}    pass\n",
         "{i}grads = [tf.clip_by_norm(g, 1.0) for g in grads]\n", "{i}@decorator\n", "{i}    # deeper\n"]


def edit(text: str, chosen: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    at = chosen.randrange(len(lines) + 1)
    current = lines[at] if at < len(lines) else ""
    indent = current[:len(current) - len(current.lstrip(" \t"))]
    action = chosen.randrange(3)
    if action == 0 or not lines:
        lines.insert(at, chosen.choice(TYPED).format(i=indent))
    elif action == 1:
        del lines[min(at, len(lines) - 1)]
    else:
        line = lines[min(at, len(lines) - 1)]
        letters = [i for i, c in enumerate(line) if c.isalpha()]
        if letters:
            i = chosen.choice(letters)
            lines[min(at, len(lines) - 1)] = line[:i] + chosen.choice("xyz") + line[i + 1:]
    return "".join(lines)


def parses(text: str) -> bool:
    try:
        compile(text, "x", "exec", dont_inherit=True, flags=0x400)
        return True
    except (SyntaxError, ValueError):
        return False


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    chosen = random.Random(args.seed)
    files = versions = partial = differ = 0
    for path in sorted(Path(args.folder).rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        files += 1
        document = Document()
        for number in range(args.edits + 1):
            new = text if number == 0 else edit(text, chosen)
            mine = sorted(document.lint(str(path), new, RULES, str(path))[0], key=lambda f: f.sort_key())
            theirs = sorted(lint_text(str(path), new, RULES, str(path))[0], key=lambda f: f.sort_key())
            versions += 1
            partial += document.text == new and 0 < document.reparsed < len(new)
            same_tree = document.text != new or cst.parse_module(new).deep_equals(document.module)
            if mine != theirs or not same_tree:
                differ += 1
                print(f"DIFFERS {path} version {number}: tree {'same' if same_tree else 'differs'}")
                for finding in set(mine) ^ set(theirs):
                    print(f"    {'server ' if finding in mine else 'command'} {finding.line}:{finding.column} "
                          f"{finding.code} {finding.message[:100]}")
            if parses(new):
                text = new
    print(f"{files} files, {versions} versions checked, {partial} re-parsed in part, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
