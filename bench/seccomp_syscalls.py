"""Measure the system calls the verifier's worker makes once its seccomp filter is loaded, to
regenerate `cliplint/verify/sandbox.py`'s allowlist.

Method: the real workload (every rule's INVALID examples and the fixtures, configs and notebooks
included, which between them reach every probe of `cliplint/verify/probes`) is verified by the
real `cliplint --verify --no-cache` under `strace -f`, once per Keras flavour (Keras 3, and tf-keras
with TF_USE_LEGACY_KERAS=1; the other flavour's worker starts too when a probe asks for it).
The trace is split by thread group; a worker is the group that loaded a filter
(`seccomp(SECCOMP_SET_MODE_FILTER, ...) = 0`), and only its calls after that point count:
TensorFlow's import happens before the filter and needs nothing from it. strace shows the calls the
filter refuses too (`= -1 EPERM`/`ENOSYS`), so a call missing from the allowlist shows up as refused
and the run ends with a list of them. The allowlist is the measured set plus, in sandbox.py, the
other C libraries' spellings of the same calls (`stat` for `newfstatat`, `poll` for `ppoll`, ...).

    python bench/seccomp_syscalls.py [--keep TRACE_FOLDER]

Prints, per syscall, the number of calls and the errors they returned (EPERM from the filter among
them), then the ioctl requests, fcntl commands and prctl options seen (calls the allowlist admits
only with listed arguments), and exits 1 when the workload made a call outside the allowlist.
Needs strace (`apt-get install -y strace`); run as root or as the user CI runs as.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cliplint.rules import ALL_RULES  # noqa: E402
from cliplint.verify import sandbox  # noqa: E402

FLAVOURS = {"keras3": "0", "tf-keras": "1"}
_LINE = re.compile(r"^(\d+)\s+([\d.]+)\s+(.*)$")
_CALL = re.compile(r"^([a-z0-9_]+)\((.*)$")
_RESUMED = re.compile(r"^<\.\.\. ([a-z0-9_]+) resumed>(.*)$")
_RESULT = re.compile(r"\)\s+=\s+(-?\w+)(?:\s+(E[A-Z]+))?")
_ARGUMENTS = {"ioctl": 1, "prctl": 0, "fcntl": 1}  # which argument of these to tally
_ARGUMENT = re.compile(r"[^,()]+")


@dataclass
class Call:
    tid: int
    time: float
    name: str
    text: str  # the arguments as strace printed them, and the result when finished on this line
    result: str = ""
    error: str = ""


@dataclass
class Tally:
    calls: Counter = field(default_factory=Counter)
    refused: Dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    arguments: Dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))


def workload(folder: Path) -> None:
    """Every rule's INVALID examples, one file each, and a copy of the fixtures."""
    shutil.copytree(ROOT / "fixtures", folder / "fixtures")
    for code, rule in ALL_RULES.items():
        for number, case in enumerate(rule.INVALID):
            (folder / f"{code}_{number}.py").write_text(textwrap.dedent(case.source), encoding="utf-8")


def trace(folder: Path, flavour: str, output: Path) -> None:
    environment = {**os.environ, "TF_USE_LEGACY_KERAS": flavour, "NO_COLOR": "1"}
    command = ["strace", "-f", "-qq", "-ttt", "-s", "64", "-o", str(output), sys.executable, "-m", "cliplint",
               "--verify", "--no-cache", "--verify-budget", "1200", "--output-format", "json", "."]
    subprocess.run(command, cwd=folder, env=environment, stdout=subprocess.DEVNULL, check=False)


def parse(path: Path) -> Tuple[List[Call], Dict[int, int]]:
    """The calls of the trace, and each thread's thread group (from clone's results)."""
    calls: List[Call] = []
    pending: Dict[int, Call] = {}
    group: Dict[int, int] = {}
    for line in path.read_text(errors="replace").splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        tid, when, body = int(match.group(1)), float(match.group(2)), match.group(3)
        resumed = _RESUMED.match(body)
        if resumed and tid in pending:
            call = pending.pop(tid)
            call.text += resumed.group(2)
        elif _CALL.match(body):
            name, rest = _CALL.match(body).groups()
            call = Call(tid, when, name, rest)
            calls.append(call)
            if rest.endswith("<unfinished ...>"):
                pending[tid] = call
                continue
        else:
            continue
        _finish(call, group)
    return calls, group


def _finish(call: Call, group: Dict[int, int]) -> None:
    found = _RESULT.findall(call.text)
    if found:
        call.result, call.error = found[-1]
    if call.name in ("clone", "clone3", "fork", "vfork") and call.result.isdigit():
        child = int(call.result)
        group[child] = group.get(call.tid, call.tid) if "CLONE_THREAD" in call.text else child


def tally(calls: Iterable[Call], group: Dict[int, int], into: Tally) -> int:
    """Add the workers' calls after their filter point; the number of workers found."""
    calls = list(calls)
    leader = {tid: _leader(tid, group) for tid in {c.tid for c in calls}}
    start = {leader[c.tid]: c.time for c in calls
             if c.name == "seccomp" and "SECCOMP_SET_MODE_FILTER" in c.text and c.result == "0"}
    for call in calls:
        since = start.get(leader[call.tid])
        if since is None or call.time <= since:
            continue
        into.calls[call.name] += 1
        if call.error:
            into.refused[call.name][call.error] += 1
        if call.name in _ARGUMENTS:
            into.arguments[call.name][_argument(call.text, _ARGUMENTS[call.name])] += 1
    return len(start)


def _leader(tid: int, group: Dict[int, int]) -> int:
    while group.get(tid, tid) != tid:
        tid = group[tid]
    return tid


def _argument(text: str, index: int) -> str:
    parts = [part.strip() for part in _ARGUMENT.findall(text.split(")")[0])]
    return parts[index] if index < len(parts) else "?"


def missing(measured: Tally) -> Set[str]:
    """Calls the workload made that are not on the allowlist (the filter refused them whatever
    their arguments): the allowlist lacks them, unless they answer "not implemented" on purpose."""
    known = set(sandbox.ALLOWED_SYSCALLS) | set(sandbox.FILTERED_SYSCALLS) | set(sandbox.NOT_IMPLEMENTED)
    return set(measured.calls) - known


def report(measured: Tally, workers: int) -> None:
    print(f"workers traced: {workers}; calls after the filter point: {sum(measured.calls.values())}")
    for name, count in sorted(measured.calls.items()):
        errors = ", ".join(f"{error} x{n}" for error, n in sorted(measured.refused.get(name, {}).items()))
        print(f"  {name:24} {count:8}  {('errors: ' + errors) if errors else ''}")
    for name, seen in sorted(measured.arguments.items()):
        print(f"{name} arguments: " + ", ".join(f"{value} x{n}" for value, n in seen.most_common()))
    print("measured set: (" + ", ".join(f'"{name}"' for name in sorted(measured.calls)) + ")")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="keep the traces in this folder")
    args = parser.parse_args()
    if shutil.which("strace") is None:
        print("needs strace: apt-get install -y strace", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="seccomp-syscalls-") as scratch:
        folder, traces = Path(scratch) / "workload", args.keep or Path(scratch)
        folder.mkdir()
        traces.mkdir(parents=True, exist_ok=True)
        workload(folder)
        measured, workers = Tally(), 0
        for flavour, value in FLAVOURS.items():
            path = traces / f"trace-{flavour}.txt"
            trace(folder, value, path)
            workers += tally(*parse(path), measured)
    report(measured, workers)
    absent = missing(measured)
    if absent:
        print(f"refused and not on the allowlist: {', '.join(sorted(absent))}")
    return 1 if absent or not workers else 0


if __name__ == "__main__":
    sys.exit(main())
