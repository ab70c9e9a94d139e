"""Verifier speed: verify 100 findings (taken round-robin from the fixtures) in one run and
report the worker's start (TensorFlow import and lock-down) once, then the time per probe by rule,
with every lock-down layer in place (the layers active are printed). Identical probes normally run
once per run; the bench forgets earlier answers so that every one of the 100 is really executed.
Then the verdict cache: every distinct probe verified once into an empty cache (a fresh session,
TensorFlow's start included), then again by a second session, which must answer all of them from
the cache without starting TensorFlow.

    python bench/verify_bench.py [--findings 100]

Targets: under 0.2 s per probe on average on a 2-core machine, import excluded (issue #3); the
second (cached) run starts no worker (issue #16).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from itertools import cycle, islice
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cliplint.engine import run  # noqa: E402
from cliplint.settings import Config  # noqa: E402
from cliplint.verify import Session  # noqa: E402
from cliplint.verify.verdicts import installed_versions  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--findings", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    found = [f for f in run([str(ROOT / "fixtures"), str(ROOT / "examples")], Config(isolated=True)).findings
             if f.probe is not None]
    sample = list(islice(cycle(found), args.findings))
    session = Session(args.timeout)
    try:
        started = time.perf_counter()
        session._worker()
        startup = time.perf_counter() - started
        per_rule = defaultdict(list)
        verdicts = defaultdict(int)
        probing = time.perf_counter()
        for finding in sample:
            session.answers.clear()  # measure the probe, not the per-run deduplication
            t0 = time.perf_counter()
            verdict = session.verify(finding)
            per_rule[finding.code].append(time.perf_counter() - t0)
            verdicts[verdict["verdict"]] += 1
        total = time.perf_counter() - probing
    finally:
        session.close()
    print(f"worker start (interpreter + lock-down + import tensorflow): {startup:.2f} s  ({session.versions})")
    print("lock-down: " + ", ".join(f"{layer} {state}" for layer, state in session.layers.items()))
    print(f"{len(sample)} findings verified in {total:.2f} s: {total / len(sample):.3f} s per probe "
          f"(target < 0.2 s) -- verdicts {dict(verdicts)}")
    print(f"{'rule':<6} {'probes':>6} {'mean s':>8} {'median s':>9} {'max s':>7}")
    for code in sorted(per_rule):
        times = per_rule[code]
        mean, median = statistics.mean(times), statistics.median(times)
        print(f"{code:<6} {len(times):>6} {mean:>8.3f} {median:>9.3f} {max(times):>7.3f}")
    cached_runs(found, args.timeout)
    return 0


def cached_runs(found, timeout: float) -> None:
    """Every finding verified by a session with an empty cache, then by a second session."""
    with tempfile.TemporaryDirectory() as folder:
        os.environ["XDG_CACHE_HOME"] = os.path.join(folder, "key")  # the bench's own cache key
        times, started = [], []
        for _ in range(2):
            session = Session(timeout, cache_folder=os.path.join(folder, "cache"))
            t0 = time.perf_counter()
            try:
                for finding in found:
                    session.verify(finding)
            finally:
                started.append(session.worker is not None)
                hits = session.cache_hits
                session.close()
            times.append(time.perf_counter() - t0)
    print(f"verdict cache ({installed_versions()}): {len(found)} findings, first run {times[0]:.2f} s "
          f"(worker started: {started[0]}), second run {times[1]:.3f} s ({hits} cache hits, "
          f"worker started: {started[1]})")


if __name__ == "__main__":
    sys.exit(main())
