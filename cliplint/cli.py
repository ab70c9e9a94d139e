"""click entry point: flags -> Config -> engine -> reporter -> exit code.

Exit codes (ruff's): 0 no findings, 1 findings (or, with `--exit-non-zero-on-fix`, a file
fixed), 2 usage/config error or internal failure, 130 interrupted (Ctrl-C). `--exit-zero` turns
1 into 0 but never hides a 2.
"""
from __future__ import annotations

import difflib
import math
import os
import sys
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, List, NoReturn, Optional, Sequence, Tuple

import click

from . import __version__
from .settings import RUN_DEFAULTS, SEVERITIES, Config, ConfigError, Overrides

if TYPE_CHECKING:  # imported when a command runs, so that `--help` stays fast
    from .engine import RunResult
    from .findings import Finding
    from .fix import FileFix

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


def _split(values: Sequence[str]) -> List[str]:
    """`--select CL001,CL003 --select CL004` -> [CL001, CL003, CL004]."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


class DefaultToCheck(click.Group):
    """`cliplint PATH...` means `cliplint check PATH...`; subcommand names win."""

    def parse_args(self, ctx, args):
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            self._refuse_mistyped_command(ctx, args[0])
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            args = ["check", *args]
        return super().parse_args(ctx, args)

    def _refuse_mistyped_command(self, ctx, word: str) -> None:
        """`cliplint chek .` is a typo, not a missing file to report while linting `.`; a word
        with a dot or a slash (`check.py`) is a path, as no command has one."""
        close = difflib.get_close_matches(word, list(self.commands), n=1)
        if close and not os.path.lexists(word) and not any(mark in word for mark in "./" + os.sep):
            ctx.fail(f"`{word}` is neither a command nor an existing path; did you mean `{close[0]}`?")

    def invoke(self, ctx: click.Context) -> NoReturn:
        """The command's exit code becomes the process's (click ignores what commands return).
        Ctrl-C: exit 130, as ruff and most Unix tools do, without click's "Aborted!" (exit 1,
        which CI reads as findings). The verifier and the report file are cleaned up on the
        way out (`finally` blocks); no traceback."""
        try:
            code = super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("cliplint: interrupted", err=True)
            code = EXIT_INTERRUPTED
        ctx.exit(code or EXIT_CLEAN)


class FiniteFloatRange(click.FloatRange):
    """A float range that also refuses `nan` and `inf` (which every comparison lets through)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number.", param, ctx)
        return number


@click.group(cls=DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cliplint")
def main() -> None:
    """Find gradient-clipping and loss-numerics mistakes in TensorFlow/Keras training code.

    `cliplint PATH...` is short for `cliplint check PATH...`.
    """


# The formats of `report.FORMATS`, listed here so that `--help` does not import the reporters.
FORMATS = ("text", "json", "json-lines", "sarif", "github", "junit", "gitlab")


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--select", multiple=True,
              help="Rules to enable (codes, prefixes, names; comma-separated). Replaces the default.")
@click.option("--extend-select", multiple=True, help="Rules to enable on top of the selection.")
@click.option("--ignore", multiple=True, help="Rules to disable.")
@click.option("--exclude", multiple=True, help="Glob patterns to skip (replaces the default list).")
@click.option("--extend-exclude", multiple=True, help="Glob patterns to skip, added to the default list.")
@click.option("--force-exclude/--no-force-exclude", default=None,
              help="Apply exclusions to paths given on the command line too (for pre-commit).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Use this pyproject.toml for every file instead of discovering one per file.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--output-format", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--output-file", type=click.Path(dir_okay=False), help="Write the report here instead of stdout.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (2 still means an error).")
@click.option("--fail-on", type=click.Choice(SEVERITIES),
              help="Exit 1 on findings of this severity or worse (default warning: any finding; or `fail-on`).")
@click.option("--statistics", is_flag=True, help="Print the number of findings per rule.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option("--verify", is_flag=True, help="Confirm each finding by running it against the installed TensorFlow.")
@click.option("--verify-timeout", type=FiniteFloatRange(min=0, min_open=True),
              help="Seconds per probe (more than 0; default 30, or `verify-timeout`).")
@click.option("--verify-budget", type=FiniteFloatRange(min=0, min_open=True),
              help="Wall-clock seconds for the whole --verify run (a backstop; default 600, or `verify-budget`); "
                   "findings left then are inconclusive.")
@click.option("--verify-cpu", type=FiniteFloatRange(min=0, min_open=True), default=20.0, show_default=True,
              help="CPU seconds of the verifier per finding; a probe that uses more is inconclusive.")
@click.option("--verify-file-budget", type=FiniteFloatRange(min=0, min_open=True), default=120.0, show_default=True,
              help="CPU seconds of the verifier per file; the file's findings left then are inconclusive.")
@click.option("--verify-unsandboxed", is_flag=True,
              help="Run --verify's snippets even where part of the worker's lock-down is unavailable "
                   "(see SECURITY.md); without it such a run executes nothing.")
@click.option("-j", "--jobs", type=click.IntRange(min=0),
              help="Worker processes (default 0: all cores, or `jobs`).")
@click.option("--stdin-filename", help="Lint standard input (path `-`) as if it were this file.")
@click.option("--cache-dir", type=click.Path(),
              help="Where results are cached, keyed by file content, settings and cliplint version "
                   "(default .cliplint_cache, or $CLIPLINT_CACHE_DIR, or `cache-dir`).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache.")
@click.option("--fix/--no-fix", default=None,
              help="Apply safe fixes (also `fix = true` in [tool.cliplint], which only the text output obeys).")
@click.option("--exit-non-zero-on-fix", is_flag=True,
              help="Exit 1 when a fix was applied, even if no finding remains (for CI).")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None,
              help="With --fix or --diff, apply unsafe fixes too (also `unsafe-fixes = true`).")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing (exit 1 if any).")
@click.option("--fix-only", is_flag=True, help="Apply fixes and report no remaining findings.")
@click.option("--show-fixes", is_flag=True, help="List each fix applied (with --fix) or offered.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every line with a finding.")
@click.option("--write-baseline", type=click.Path(dir_okay=False),
              help="Record today's findings in this file (for --baseline) and exit 0; fixes nothing.")
@click.option("--baseline", type=click.Path(dir_okay=False),
              help="Report only findings this baseline file (from --write-baseline) does not hold.")
@click.option("-v", "--verbose", is_flag=True, help="Also say which named files were skipped, and why.")
def check(paths: Tuple[str, ...], **flags: Any) -> int:
    """Lint PATHS (files and folders; default: the current folder)."""
    # One namespace for the thirty-odd flags: the helpers below take what they need from it.
    return run_check(list(paths), SimpleNamespace(**flags))


def run_check(paths: List[str], o: SimpleNamespace) -> int:
    """The exit code of `cliplint check`; a configuration error is reported and exits 2."""
    fixing = None
    try:
        config = _config(o)
        targets = _lintable(paths, o.verbose) if paths else ["."]
        _run_settings(o, config, targets)
        cache = None if o.no_cache else o.cache_dir
        if o.diff:
            return _diff(config, targets, o.unsafe_fixes, o.verify, o.verify_timeout, o.quiet)
        if _fixing(o, config, targets):
            fixing = _fix(config, targets, o.unsafe_fixes, o.verify, o.verify_timeout)
        result = _lint(config, targets, o.jobs or os.cpu_count() or 1, o.stdin_filename, cache, o.verify)
        result.findings = _with_severities(result.findings, config)
        if o.write_baseline:
            return _write_baseline(o.write_baseline, result)
        if o.baseline:
            _apply_baseline(o.baseline, result, o.quiet)
        for warning in (*result.warnings, *config.warnings()):
            click.echo(f"cliplint: warning: {warning}", err=True)
        if o.add_noqa:
            return _add_noqa(result, config, targets)
        if o.verify:
            result.findings = _verified(result.findings, o, cache)
    except ConfigError as err:
        click.echo(f"cliplint: error: {err}", err=True)
        return EXIT_ERROR
    return _report(result, fixing, o)


def _config(o: SimpleNamespace) -> Config:
    """The run's configuration from the flags (ConfigError for flags that contradict each other,
    or `--verify` without TensorFlow)."""
    if o.write_baseline and o.baseline:
        raise ConfigError("--write-baseline and --baseline together: write a new baseline without --baseline")
    config = Config(
        Overrides(select=_split(o.select) if o.select else None, extend_select=_split(o.extend_select),
                  ignore=_split(o.ignore), exclude=_split(o.exclude) if o.exclude else None,
                  extend_exclude=_split(o.extend_exclude), force_exclude=o.force_exclude,
                  fix=_fixes_wanted(o.fix, o.fix_only, o.output_format), unsafe_fixes=o.unsafe_fixes),
        config_file=o.config_file, isolated=o.isolated)
    if o.verify:
        from .verify import require_tensorflow

        require_tensorflow()
    return config


def _verified(findings: List[Finding], o: SimpleNamespace, cache: Optional[str]) -> List[Finding]:
    from .verify import verify_findings

    return verify_findings(findings, timeout=o.verify_timeout, budget=o.verify_budget, cache_folder=cache,
                           progress=not o.quiet and sys.stderr.isatty(), cpu=o.verify_cpu,
                           file_budget=o.verify_file_budget, unsandboxed=o.verify_unsandboxed)


def _report(result: RunResult, fixing: Optional[List[FileFix]], o: SimpleNamespace) -> int:
    """Print the report (and what `--fix` did); the exit code."""
    if o.fix_only:
        result.findings = []
    to_stdout = o.output_format == "text" and not o.output_file
    fixes = _fix_report(fixing, result, o.show_fixes, o.quiet, o.unsafe_fixes) if fixing is not None else []
    if fixing is None or not o.fix_only:
        # on a text report the fix summary comes before its last word ("All checks passed!")
        if not _emit(result, o.output_format, o.output_file, o.statistics, o.quiet, o.verify,
                     fixes if to_stdout else []):
            return EXIT_ERROR
    if fixes and (o.fix_only or not to_stdout):
        click.echo("\n".join(fixes), err=not to_stdout)
    if fixing is None and o.show_fixes:
        _offered_fixes(result, o.quiet)
    fixed_any = o.exit_non_zero_on_fix and fixing is not None and any(f.changed for f in fixing)
    return _exit_code(result, o, fixed_any)


def _lintable(paths: List[str], verbose: bool) -> List[str]:
    """The paths to lint: files named explicitly of a kind cliplint does not lint (README.md,
    requirements.txt) are skipped, as a folder walk skips them; `-v` says so."""
    from .discovery import lintable

    kept = []
    for path in paths:
        if path == "-" or not os.path.isfile(path) or lintable(path):
            kept.append(path)
        elif verbose:
            click.echo(f"cliplint: skipped {path}: not a file kind cliplint lints "
                       "(Python, notebooks, YAML/JSON/TOML training configs, .keras)", err=True)
    return kept


def _run_settings(o: SimpleNamespace, config: Config, targets: List[str]) -> None:
    """Fill in the run-wide options no flag gave: $CLIPLINT_CACHE_DIR for the cache, then the
    settings of the first path (`[tool.cliplint]` keys fail-on, jobs, cache-dir, verify-*)."""
    if o.cache_dir is None:
        o.cache_dir = os.environ.get("CLIPLINT_CACHE_DIR")
    first = o.stdin_filename if targets == ["-"] and o.stdin_filename else (targets or ["."])[0]
    settings = config.for_path(os.path.join(first, "_") if os.path.isdir(first) else first)
    for name in RUN_DEFAULTS:
        if getattr(o, name) is None:
            setattr(o, name, settings.run_setting(name))


def _with_severities(findings, config: Config):
    """Each finding with the severity `[tool.cliplint.severity]` gives its rule in its file's settings."""
    from dataclasses import replace

    changed = []
    by_path: dict = {}  # a file's findings share its settings: one lookup per file, not per finding
    for finding in findings:
        settings = by_path.get(finding.path)
        if settings is None:
            settings = by_path[finding.path] = config.for_path(finding.path)
        level = settings.severity_of(finding.code, finding.severity) if settings.severity else finding.severity
        changed.append(finding if level == finding.severity else replace(finding, severity=level))
    return changed


def _write_baseline(path: str, result) -> int:
    from .baseline import write

    count = write(path, result.findings)
    click.echo(f"Wrote a baseline of {count} finding{'s' if count != 1 else ''} to {path}.")
    return EXIT_ERROR if result.crashed else EXIT_CLEAN


def _apply_baseline(path: str, result, quiet: bool) -> None:
    from .baseline import without_baselined

    result.findings, known = without_baselined(path, result.findings)
    if known and not quiet:
        click.echo(f"cliplint: {known} finding{'s' if known != 1 else ''} in the baseline {path} not shown", err=True)


def _fixing(o: SimpleNamespace, config: Config, targets: List[str]) -> bool:
    """Does this run fix files: `--fix`, `--fix-only`, or `fix = true` (not for standard input,
    nor while a baseline is written: that records the code as it is)?"""
    if not targets or targets == ["-"] or o.write_baseline:
        return False
    return o.fix_only or o.fix or (o.fix is None and _settings_fix(config, targets[0]))


def _settings_fix(config: Config, target: str) -> bool:
    """`fix = true` in the settings of `target` (a folder's own pyproject.toml counts for it)."""
    return config.for_path(os.path.join(target, "_") if os.path.isdir(target) else target).fix


def _fixes_wanted(fix: Optional[bool], fix_only: bool, output_format: str) -> Optional[bool]:
    """The command line's say on fixing: `--fix`/`--fix-only` fix in every output format, but a
    machine format (a CI check) never obeys `fix = true` from the checkout's own settings: that
    would rewrite the files under review and pass with the mistakes still committed."""
    if fix_only:
        return True
    if fix is None and output_format != "text":
        return False
    return fix


def _fix(config: Config, targets: List[str], unsafe: Optional[bool], verify: bool, timeout: float,
         **how: bool) -> List[FileFix]:
    """The fixes of `targets` (`how`: fix_paths' write/everywhere), each verified with `verify`."""
    from .fix import FixVerifier, fix_paths

    verifier = FixVerifier(timeout) if verify else None  # TensorFlow's worker: only when verifying
    try:
        fixed, _ = fix_paths(targets, config, unsafe, accept=verifier, **how)
    finally:
        if verifier is not None:
            verifier.close()
    return fixed


def _diff(config: Config, targets: List[str], unsafe: Optional[bool], verify: bool, timeout: float,
          quiet: bool) -> int:
    """`--diff`: what `--fix` would change, as a unified diff; nothing is written."""
    from .fix import where

    fixed = _fix(config, targets, unsafe, verify, timeout, write=False, everywhere=True)
    click.echo("".join(f.diff for f in fixed), nl=False)
    count = sum(len(f.applied) for f in fixed)
    if not quiet:
        notes = [f"{where(f.display, e)}: {e.code} {note}" for f in fixed for e, note in f.notes]
        for note in notes:
            click.echo(note, err=True)
        click.echo(f"Would fix {count} problem{'s' if count != 1 else ''}." if count else "No fixes available.",
                   err=True)
    return EXIT_FINDINGS if any(f.changed for f in fixed) else EXIT_CLEAN


def _fix_report(fixed, result, show_fixes: bool, quiet: bool, unsafe: Optional[bool]) -> List[str]:
    """What a `--fix` run says: each fix with `--show-fixes` (also under `-q`), the verifier's
    notes, then ruff's "Fixed N problems (M remaining; K more with --unsafe-fixes)" unless `-q`."""
    from .fix import where

    lines = [f"{where(f.display, e)}: {e.code} fixed: {e.title}" for f in fixed for e in f.applied] \
        if show_fixes else []
    if quiet:
        return lines
    lines += [f"{where(f.display, e)}: {e.code} {note}" for f in fixed for e, note in f.notes]
    count = sum(len(f.applied) for f in fixed)
    more = 0 if unsafe else sum(1 for f in result.findings if (f.fix or {}).get("safety") == "unsafe")
    tail = f"; {more} more with --unsafe-fixes" if more else ""
    lines.append(f"Fixed {count} problem{'s' if count != 1 else ''} ({len(result.findings)} remaining{tail}).")
    return lines


def _offered_fixes(result, quiet: bool) -> None:
    """`--show-fixes` without `--fix`: each fix offered (also under `-q`), then how many apply."""
    from .report.text import location

    offered = [f for f in result.findings if f.fix]
    if not offered:
        return
    for finding in offered:
        click.echo(f"{location(finding)}: {finding.code} {finding.fix['safety']} fix: {finding.fix['title']}")
    safe = sum(1 for f in offered if f.fix["safety"] == "safe")
    if not quiet:
        click.echo(f"{safe} fixable with --fix ({len(offered) - safe} more with --fix --unsafe-fixes).")


def _add_noqa(result, config: Config, targets: List[str]) -> int:
    from .discovery import discover, unique
    from .fix import add_noqa_paths
    from .report.text import location

    by_display = {t.display: t for t in unique(discover(targets, config)) if t.kind == "file"}
    added, left = add_noqa_paths(result.findings, by_display)
    click.echo(f"Added {added} noqa directive{'s' if added != 1 else ''}.")
    if left:
        click.echo(f"Not suppressed: {len(left)} finding{'s' if len(left) != 1 else ''} where no comment can go "
                   "(JSON configs and .keras archives hold no comments; CL000 is fixed, not silenced; use "
                   "per-file-ignores or a baseline):")
        for finding in left:
            click.echo(f"  {location(finding)}: {finding.code}")
    return EXIT_CLEAN


def _lint(config: Config, paths: List[str], jobs: int, stdin_filename: Optional[str], cache: Optional[str],
          probes: bool):
    """`probes`: the findings will be verified (only then must they carry what the verifier runs)."""
    from .engine import lint_stdin, run

    if paths == ["-"]:
        return lint_stdin(sys.stdin.buffer.read(), stdin_filename or "-", config)
    return run(paths, config, jobs, cache, probes)


def _emit(result, output_format: str, output_file: Optional[str], statistics: bool, quiet: bool,
          verified: bool, fixes: Sequence[str] = ()) -> bool:
    """Write the report; False (said on stderr) when the report file cannot be written."""
    from .report import FORMATS, RunInfo
    from .report.text import statistics as statistics_table

    color = output_file is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    if output_format in ("json", "json-lines", "sarif") and any(f.fix for f in result.findings):
        from .report.fixes import with_edits

        result.findings = with_edits(result.findings)
    text = FORMATS[output_format](result.findings, RunInfo(result.files, color, quiet, verified, list(fixes)))
    if statistics and output_format == "text":
        text = statistics_table(result.findings) + "\n" if result.findings else text
    if output_file:
        from .files import write_atomically

        try:
            write_atomically(output_file, text)
        except OSError as err:  # a missing folder, no permission, a full disk: nothing is left behind
            click.echo(f"cliplint: error: cannot write the report to {output_file}: {err.strerror or err}", err=True)
            return False
    else:
        click.echo(text, nl=False)
    return True


def _exit_code(result, o: SimpleNamespace, fixed_any: bool = False) -> int:
    if result.crashed:
        return EXIT_ERROR
    counted = [f for f in result.findings
               if not (o.verify and f.verification and f.verification["verdict"] == "not-reproduced")
               and (o.fail_on == "warning" or f.severity == "error")]
    return EXIT_FINDINGS if (counted or fixed_any) and not o.exit_zero else EXIT_CLEAN


@main.command("rules")
def list_rules() -> None:
    """List every rule with its code, name, severity and summary."""
    from .findings import UNREADABLE
    from .rules import ALL_RULES

    click.echo(f"{UNREADABLE.code}  {UNREADABLE.name:<34} {UNREADABLE.severity:<8} {UNREADABLE.summary}")
    for code, rule in ALL_RULES.items():
        click.echo(f"{code}  {rule.name:<34} {rule.severity:<8} {rule.summary}")


@main.command()
@click.argument("rule")
def explain(rule: str) -> int:
    """Print a rule's documentation (code or name): why it is bad, example, use instead."""
    from .report.links import rule_page
    from .settings import resolve_codes

    try:
        codes = resolve_codes([rule], "explain")
    except ConfigError as err:
        click.echo(f"cliplint: error: {err}", err=True)
        return EXIT_ERROR
    for code in sorted(codes):
        click.echo(rule_page(code))
    return EXIT_CLEAN


@main.command("problem-matcher")
@click.option("--vscode", "editor", flag_value="vscode", default=True,
              help="The `problemMatcher` object for a VS Code task (tasks.json).")
@click.option("--github", "editor", flag_value="github",
              help="A GitHub Actions matcher file (register it with ::add-matcher::).")
def problem_matcher(editor: str) -> None:
    """Print a problem matcher that turns cliplint's text output into editor/CI problems."""
    from importlib.resources import files

    name = "vscode-problem-matcher.json" if editor == "vscode" else "github-problem-matcher.json"
    click.echo(files("cliplint").joinpath("data", name).read_text(encoding="utf-8"), nl=False)


@main.command()
def server() -> int:
    """Run the language server for editors (LSP over stdin/stdout; needs cliplint's `lsp` extra)."""
    try:
        from .server import serve
    except ModuleNotFoundError as err:
        if err.name not in ("pygls", "lsprotocol"):
            raise
        click.echo("cliplint: error: `cliplint server` needs pygls and lsprotocol: install cliplint's `lsp` extra "
                   "(in a clone: pip install '.[lsp]'; see the README's Install)", err=True)
        return EXIT_ERROR
    return serve()


def console() -> NoReturn:
    """The `cliplint` command and `python -m cliplint`: the one place the process exits, with
    the exit code the command returned. It exits without tearing the interpreter down: freeing
    libcst's hundreds of classes and the parsed trees takes ~0.1 s, a fifth of a one-file run
    (mypy exits the same way), and nothing is left to wait for: the report, the cache, the
    verifier's worker and folder and the lint pool are closed by the time a command returns."""
    try:
        main()
        code = EXIT_CLEAN  # not reached: click's main always exits
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else EXIT_CLEAN if done.code is None else EXIT_ERROR
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `cliplint ... | head`: the reader has gone, as with any CLI
        pass
    os._exit(code)
