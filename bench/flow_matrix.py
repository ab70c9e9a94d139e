"""The value-flow engine's generated matrix, whole: every source x carrier x sink and every pair of
carriers, each with its clean twin (tests/flow_matrix.py builds them; the test suite runs a sample).

    python bench/flow_matrix.py            # table of misses per carrier, false positives, gate disagreements
    python bench/flow_matrix.py --single   # one carrier per program only
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from flow_matrix import check, matrix  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", action="store_true", help="only programs with one carrier")
    parser.add_argument("--show", type=int, default=3, help="example programs to print per missed carrier")
    options = parser.parse_args()
    programs = list(matrix(nested=not options.single))
    missed, total = Counter(), Counter()
    false_positives, disagreements, examples = [], [], {}
    for program in programs:
        outcome = check(program)
        for carrier in set(program.carriers):
            total[carrier] += 1
            if not outcome.found:
                missed[carrier] += 1
                examples.setdefault(carrier, []).append(program)
        if outcome.twin_findings:
            false_positives.append((program, outcome.twin_findings))
        if not outcome.gate_agrees:
            disagreements.append(program)
    found = len(programs) - len({id(p) for missed_programs in examples.values() for p in missed_programs})
    twins = sum(len(p.twins) for p in programs)
    print(f"{len(programs)} programs (+ {twins} clean twins): {found} found, "
          f"{len(false_positives)} twins with findings, {len(disagreements)} gate disagreements")
    for carrier in sorted(total, key=lambda c: -missed[c]):
        print(f"  {carrier:24} missed {missed[carrier]:5} of {total[carrier]}")
    for carrier, programs_missed in examples.items():
        for program in programs_missed[:options.show]:
            print(f"\n--- missed: {program.label}\n{program.text}")
    for program, findings in false_positives[:options.show * 3]:
        print(f"\n--- twin finding: {program.label}: {findings}\n" + "\n".join(program.twins))
    return 0 if not (examples or false_positives or disagreements) else 1


if __name__ == "__main__":
    sys.exit(main())
