"""Orchestration only: discover -> cache -> prefilter -> analyse -> suppress, file by file.

Which files (`discovery`), how a Python text becomes findings (`lint`: the prefilter, the ast
gate, the parse and the rules), notebooks (`notebook`) and training configs (`configs`) live
in their own modules. The rules are imported only when a file is linted, the parser only when
a file needs parsing: a fully cached run never imports libcst.
"""
from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from functools import partial
from typing import Dict, List, Optional, Sequence, Set, Tuple

from . import catalogue
from .cache import LastRun, result_cache, stat_key
from .discovery import Target, discover, display_of, force_excluded, unique
from .files import FileTooLarge, open_regular, read_regular
from .findings import Finding, bad_input
from .lint import linked_to_project, lint_bytes, prefilter, untouched
from .project.session import CURRENT, Project
from .settings import CONFIG_SUFFIXES, Config


@dataclass
class RunResult:
    findings: List[Finding]
    files: int
    crashed: bool
    warnings: List[str] = field(default_factory=list)  # for stderr: a cache that was not used, and why


def lint_linked(target: Target, project: Project) -> Tuple[List[Finding], bool, Dict[str, str]]:
    """`lint_target`, following the file's imports of its project's modules into `project`'s
    summaries; also the summaries read (module file -> hash)."""
    with project.reading(target.settings.src) as reads:
        findings, crashed = lint_target(target)
    return findings, crashed, reads


def lint_target(target: Target) -> Tuple[List[Finding], bool]:
    """All findings for one file, as its settings select them."""
    settings = target.settings
    codes = settings.enabled_codes(target.path)
    findings, crashed = _read_and_lint(target, codes, settings)
    return [f for f in findings if f.code in codes], crashed


def _rules(codes) -> list:
    from .rules import selected  # rules import libcst: only when a file may hold a finding

    return selected(codes)


def _read_and_lint(target: Target, codes, settings) -> Tuple[List[Finding], bool]:
    display = target.display
    if target.kind == "missing":
        return [bad_input(display, "no such file or folder")], False
    if target.kind != "file":
        return [bad_input(display, target.kind)], False
    try:
        if target.path.lower().endswith(".keras"):
            descriptor, _ = open_regular(target.path)
            with os.fdopen(descriptor, "rb") as archive:  # read lazily from the archive, any size
                return _audit(target.path, archive, _rules(codes), display)
        data = read_regular(target.path, settings.max_file_size)
    except FileTooLarge as err:
        oversized = _oversized(target.path, err.size, settings, display)
        return ([oversized] if oversized is not None else []), False
    except OSError as err:
        return [bad_input(display, f"cannot read: {err.strerror or err}")], False
    findings, crashed = _lint_data(target.path, data, codes, display)
    cache = result_cache(target.cache)[0] if target.cache is not None else None
    if cache is not None:
        reading = CURRENT.get()
        key = cache.key(data, display, codes, repr(settings.src))  # the roots decide what its imports are
        cache.put(key, findings, crashed, reading.reads if reading is not None else None)
    return findings, crashed


def _oversized(path: str, size: int, settings, display: str) -> Optional[Finding]:
    """CL000 for a file above max-file-size (a `.keras` archive is read lazily: any size)."""
    return None if path.lower().endswith(".keras") else settings.too_large(display, size)


def _cached(target: Target, project: Project) -> Optional[Tuple[List[Finding], bool]]:
    """The cached result for a file whose bytes, settings and cliplint have not changed, nor
    the summaries of the project's modules it read."""
    cache = result_cache(target.cache)[0] if target.cache is not None else None
    if cache is None or not _cacheable(target):
        return None
    try:
        data = read_regular(target.path, target.settings.max_file_size)
    except OSError:
        return None  # linted, which reports why
    codes = target.settings.enabled_codes(target.path)
    hit = cache.get(cache.key(data, target.display, codes, repr(target.settings.src)))
    if hit is None or not project.unchanged(hit[2], target.settings.src):
        return None
    return [_finding(record, record["probe"]) for record in hit[0] if record["code"] in codes], hit[1]


def _finding(record: dict, probe: Optional[dict]) -> Finding:
    """A finding from its cached record (`asdict` of one, read from an authenticated entry of
    this build; the last run's keeps its probe apart), its fields filled in directly: a frozen
    dataclass's `__init__` sets each field with `object.__setattr__`, eight times the cost,
    and a warm run makes thousands."""
    finding = object.__new__(Finding)
    finding.__dict__.update(record)
    finding.__dict__["probe"] = probe
    return finding


def _lint_data(path: str, data: bytes, codes, display: str) -> Tuple[List[Finding], bool]:
    if path.lower().endswith(CONFIG_SUFFIXES):
        return _audit(path, data, _rules(codes), display)
    if path.lower().endswith(".ipynb"):
        from .notebook import lint_notebook

        rules = _rules(codes)
        follows = prefilter(data, rules) or (b"import" in data and _imports_project(path, data))
        return lint_notebook(path, data, rules, display) if follows else ([], False)
    tokens = catalogue.tokens(codes)
    found = untouched(data, tokens, display) if tokens is not None else None  # no rule, no libcst
    if found is not None and not linked_to_project(path, data):
        return found, False
    return lint_bytes(path, data, _rules(codes), display)


def _imports_project(notebook: str, data: bytes) -> bool:
    """Does a notebook with no rule's token import its project's modules (which may make what
    it logs: the gate decides, with their code)?"""
    from .notebook import code_cells

    cells, failure = code_cells(notebook, data)
    return failure is None and linked_to_project(notebook, "\n".join(source for _, source in cells).encode())


def _audit(path: str, source, rules, display: str) -> Tuple[List[Finding], bool]:
    from .configs import audit

    try:
        return audit(path, source, rules, display), False
    except Exception as err:  # a bug in the auditor must not stop the run
        return [bad_input(display, f"internal error in the config auditor: {type(err).__name__}: {err}")], True


def run(paths: Sequence[str], config: Config, jobs: int = 1, cache: Optional[str] = None,
        probes: bool = True) -> RunResult:
    """`probes`: False when the findings will not be verified (a result remembered from the last
    run then comes without what the verifier runs: reading it is a third of a warm run)."""
    targets = unique(discover(paths, config))
    cache, warnings = _usable_cache(cache)
    project = Project(cache)  # the summaries of the project modules the files import (pass 1, on demand)
    results: List = [None] * len(targets)
    misses = []
    last = _last_run(cache, paths)
    # stat before reading: a file written after its stat gets a new key, never an old result
    keys = [stat_key(t.path) if last is not None and _cacheable(t) else None for t in targets]
    remembered = [False] * len(targets)
    for index, target in enumerate(targets):
        target.cache = cache
        hit = _remembered(last, target, keys[index], probes) if last is not None else None
        remembered[index] = hit is not None
        if hit is None and cache is not None:
            hit = _cached(target, project)
            keys[index] = None if hit is not None else keys[index]  # it read summaries: no stat shortcut
        if hit is None:
            misses.append(index)
        results[index] = hit
    imported = _lint_misses(targets, misses, results, keys, project, jobs)
    # A file linted afresh may be a new (or changed) importer of a file answered from the cache,
    # whose findings may now come in through it (`losses.ce(model(x), y)`): that one is linted too.
    fresh = set(misses)
    again = [index for index, target in enumerate(targets)
             if index not in fresh and results[index] is not None and os.path.abspath(target.path) in imported]
    _lint_misses(targets, again, results, keys, project, jobs)
    if last is not None:
        last.save(_entries(last, targets, keys, results, remembered))
    findings = [f for found, _ in results for f in found]
    findings.sort(key=Finding.sort_key)
    return RunResult(findings, len(targets), any(crashed for _, crashed in results), warnings)


def _lint_misses(targets: List[Target], indices: List[int], results: List, keys: List, project: Project,
                 jobs: int) -> Set[str]:
    """Lint the files at `indices` into `results`; the project's modules they read."""
    read: Set[str] = set()
    for index, result in zip(indices, _map(partial(lint_linked, project=project), [targets[i] for i in indices], jobs)):
        results[index] = result[:2]
        if result[2]:  # its findings depend on other files: only the content cache checks those
            keys[index] = None
        read.update(result[2])
    return read


def _last_run(cache: Optional[str], paths: Sequence[str]) -> Optional[LastRun]:
    store = result_cache(cache)[0] if cache is not None else None
    return LastRun(store, paths) if store is not None else None


def _cacheable(target: Target) -> bool:
    return target.kind == "file" and not target.path.lower().endswith(".keras")  # an archive: read lazily


def _remembered(last: LastRun, target: Target, key, probes: bool) -> Optional[Tuple[List[Finding], bool]]:
    settings = target.settings
    codes = settings.enabled_codes(target.path)
    hit = last.get(target.display, key, codes, settings.max_file_size, probes)
    if hit is None:
        return None
    records, payloads, crashed = hit
    return [_finding(record, probe) for record, probe in zip(records, payloads) if record["code"] in codes], crashed


def _entries(last: LastRun, targets: List[Target], keys, results, remembered: List[bool]) -> dict:
    """The next run's entries: each file that had a stat key, with its results (as they were
    read when they came from the last run: converting thousands of findings back costs more
    than the rest of a warm run)."""
    entries = {}
    for target, key, (found, crashed), same in zip(targets, keys, results, remembered):
        if key is not None:
            entries[target.display] = last.entries[target.display] if same else LastRun.entry(
                key, target.settings.enabled_codes(target.path), target.settings.max_file_size, found, crashed)
    return entries


def _usable_cache(folder: Optional[str]) -> Tuple[Optional[str], List[str]]:
    """The cache folder when it can be used safely, else None and the warning that says why."""
    if folder is None:
        return None, []
    cache, why = result_cache(folder)
    if cache is not None or not why:  # no reason given: an I/O error, which only costs the cache
        return (folder if cache is not None else None), []
    return None, [f"not using the cache: {why}; linting without it (remove it, or pass --cache-dir or --no-cache)"]


def _map(function, targets: List[Target], jobs: int) -> List:
    """`function` (lint_linked) of each target, in a pool of `jobs` processes for many files.
    A worker the parser crashes (a signal) takes its pool down: the files it had not finished
    are linted again, each in a process of its own, and the one that dies gets a CL000."""
    # A pool costs ~0.1 s to start: only worth it for many files.
    if jobs <= 1 or len(targets) < PARALLEL_MIN_FILES:
        return [function(t) for t in targets]
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    size = max(1, len(targets) // (jobs * 8))
    chunks = [targets[start:start + size] for start in range(0, len(targets), size)]
    results: List = []
    # Ctrl-C reaches the whole process group: the workers leave it to this process, whose
    # KeyboardInterrupt cancels the chunks not started (no traceback from each worker).
    pool = ProcessPoolExecutor(jobs, initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN))
    try:
        futures = [pool.submit(_each, function, chunk) for chunk in chunks]
        for chunk, future in zip(chunks, futures):
            try:
                results.extend(future.result())
            except BrokenProcessPool:
                results.extend(None for _ in chunk)
    except KeyboardInterrupt:
        _stop_workers(pool)  # a chunk in flight can take many seconds on a loaded machine: not waited for
        raise
    finally:
        pool.shutdown(cancel_futures=True)
    return [result if result is not None else _alone(function, target) for target, result in zip(targets, results)]


def _stop_workers(pool) -> None:
    """End a pool's worker processes now (an interrupted run keeps none of their results)."""
    for process in list(getattr(pool, "_processes", {}).values()):  # CPython's executor keeps them here
        process.terminate()


def _each(function, targets: List[Target]) -> List:
    return [function(target) for target in targets]


def _alone(function, target: Target) -> Tuple[List[Finding], bool, Dict[str, str]]:
    """`function(target)` (`lint_linked`) in a process of its own: CL000 when the process dies."""
    from .lint import contained, died_parsing

    result, died = contained(function, target)
    return (died_parsing(target.display, died), False, {}) if died else result


PARALLEL_MIN_FILES = 32  # fewer files are linted in this process: a pool would cost more than it saves


def lint_stdin(data: bytes, filename: str, config: Config) -> RunResult:
    """Standard input, linted, configured and reported as the file `filename` would be on disk:
    its kind (Python, notebook, training config) by its name, its settings by its path."""
    settings = config.for_path(filename)
    if filename != "-" and force_excluded(filename, settings):
        return RunResult([], 0, False)
    codes = settings.enabled_codes(filename)
    display = display_of(filename) if filename != "-" else "-"
    oversized = _oversized(filename, len(data), settings, display)
    with Project().reading(settings.src):
        findings, crashed = ([oversized], False) if oversized else _lint_data(filename, data, codes, display)
    findings = sorted((f for f in findings if f.code in codes), key=Finding.sort_key)
    return RunResult(findings, 1, crashed)
