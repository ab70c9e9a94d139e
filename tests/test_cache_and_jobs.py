"""The result cache never returns stale results; --jobs does not change the output."""
import shutil

import pytest

from cliplint import cache as cache_module
from cliplint import engine
from cliplint.settings import Config, Overrides

BAD = "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n"


@pytest.fixture
def counted(monkeypatch):
    """Count how many files are really linted (cache misses)."""
    calls = []
    real = engine._lint_data

    def spy(path, *args):
        calls.append(path)
        return real(path, *args)

    monkeypatch.setattr(engine, "_lint_data", spy)
    return calls


def lint(path, folder, **overrides):
    return engine.run([str(path)], Config(Overrides(**overrides), isolated=True), jobs=1, cache=str(folder)).findings


def test_second_run_is_served_from_the_cache(tmp_path, counted):
    (tmp_path / "a.py").write_text(BAD)
    first = lint(tmp_path / "a.py", tmp_path / "cache")
    second = lint(tmp_path / "a.py", tmp_path / "cache")
    assert first == second and [f.code for f in first] == ["CL001"]
    assert len(counted) == 1
    assert second[0].probe == first[0].probe  # --verify still works on cached findings


def test_a_warm_run_that_does_not_verify_leaves_the_probes_unread(tmp_path, counted):
    """The last run's entry keeps the findings' probes apart, a third of it: a run that will
    not verify gets its findings without them; one that will still gets them."""
    (tmp_path / "a.py").write_text(BAD)
    first = lint(tmp_path / "a.py", tmp_path / "cache")
    plain = engine.run([str(tmp_path / "a.py")], Config(isolated=True), jobs=1, cache=str(tmp_path / "cache"),
                       probes=False).findings
    assert plain == first and plain[0].probe is None
    assert lint(tmp_path / "a.py", tmp_path / "cache")[0].probe == first[0].probe is not None
    assert len(counted) == 1


def test_a_verify_run_after_a_plain_warm_one_still_verifies(tmp_path, run_cli):
    """Through the command: the second run is answered by the last run's entry, probes and all."""
    import json

    (tmp_path / "a.py").write_text(BAD)
    assert run_cli("--cache-dir", "cache", "a.py").returncode == 1
    assert run_cli("--cache-dir", "cache", "a.py").returncode == 1  # warm, without the probes
    records = json.loads(run_cli("--verify", "--cache-dir", "cache", "--output-format", "json", "a.py").stdout)
    assert [(r["code"], r["verification"]["verdict"]) for r in records] == [("CL001", "confirmed")]


def test_a_clean_file_is_cached_as_an_empty_entry(tmp_path, counted):
    (tmp_path / "clean.py").write_text(BAD.replace(", clipvalue=0.5", ""))
    assert lint(tmp_path / "clean.py", tmp_path / "cache") == []
    entries = [p for p in (tmp_path / "cache" / "results").rglob("*.json") if not _is_last_run(p, tmp_path)]
    assert len(entries) == 1 and entries[0].stat().st_size == cache_module.MAC_CHARS  # only its MAC
    assert lint(tmp_path / "clean.py", tmp_path / "cache") == [] and len(counted) == 1


def _is_last_run(entry, tmp_path):
    """The one entry holding the whole run by file (`cache.LastRun`; a file's own entry is
    empty or `{"findings": ...}`)."""
    body = entry.read_bytes()[cache_module.MAC_CHARS:]
    return bool(body) and not body.startswith(b'{"findings"')


def test_a_warm_run_reads_no_file_whose_stat_is_unchanged(tmp_path, counted, monkeypatch):
    """The last run's entry answers for every file whose size, times, inode and device are
    unchanged: the file is not even read (nor its per-file entry)."""
    (tmp_path / "a.py").write_text(BAD)
    first = lint(tmp_path / "a.py", tmp_path / "cache")
    reads = []
    real = engine.read_regular
    monkeypatch.setattr(engine, "read_regular", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    assert lint(tmp_path / "a.py", tmp_path / "cache") == first
    assert reads == [] and len(counted) == 1


def test_an_edit_that_keeps_size_and_mtime_is_still_seen(tmp_path, counted):
    """`touch -d` can put the modification time back; the change time it cannot."""
    import os

    path = tmp_path / "a.py"
    path.write_text(BAD)
    before = path.stat()
    assert [f.code for f in lint(path, tmp_path / "cache")] == ["CL001"]
    path.write_text(BAD.replace("clipvalue=0.5", "clipvalue=None"[:len("clipvalue=0.5")]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    lint(path, tmp_path / "cache")
    assert len(counted) == 2


def test_a_planted_last_run_entry_is_ignored(tmp_path, counted):
    (tmp_path / "a.py").write_text(BAD)
    lint(tmp_path / "a.py", tmp_path / "cache")
    entry = next(p for p in (tmp_path / "cache" / "results").rglob("*.json") if _is_last_run(p, tmp_path))
    body = entry.read_bytes()
    entry.write_bytes(body[:cache_module.MAC_CHARS] + body[cache_module.MAC_CHARS:].replace(b"CL001", b"CL004"))
    assert [f.code for f in lint(tmp_path / "a.py", tmp_path / "cache")] == ["CL001"]


def test_file_edit_invalidates(tmp_path, counted):
    path = tmp_path / "a.py"
    path.write_text(BAD)
    lint(path, tmp_path / "cache")
    path.write_text(BAD.replace("clipvalue=0.5", "clipvalue=None"))
    assert lint(path, tmp_path / "cache") == []
    assert len(counted) == 2


def test_setting_change_invalidates(tmp_path, counted):
    (tmp_path / "a.py").write_text(BAD)
    assert lint(tmp_path / "a.py", tmp_path / "cache")
    assert lint(tmp_path / "a.py", tmp_path / "cache", ignore=["CL001"]) == []
    assert len(counted) == 2


def test_version_change_invalidates(tmp_path, counted, monkeypatch):
    (tmp_path / "a.py").write_text(BAD)
    lint(tmp_path / "a.py", tmp_path / "cache")
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "another cliplint")
    lint(tmp_path / "a.py", tmp_path / "cache")
    assert len(counted) == 2


def test_corrupt_entries_are_misses(tmp_path, counted):
    (tmp_path / "a.py").write_text(BAD)
    lint(tmp_path / "a.py", tmp_path / "cache")
    for entry in (tmp_path / "cache").rglob("*.json"):
        entry.write_text("{half an entr")
    assert [f.code for f in lint(tmp_path / "a.py", tmp_path / "cache")] == ["CL001"]
    assert len(counted) == 2


def test_cache_folder_is_git_ignored(tmp_path, run_cli):
    (tmp_path / "a.py").write_text(BAD)
    run_cli("a.py")
    assert (tmp_path / ".cliplint_cache" / ".gitignore").read_text().strip().endswith("*")
    shutil.rmtree(tmp_path / ".cliplint_cache")
    run_cli("--no-cache", "a.py")
    assert not (tmp_path / ".cliplint_cache").exists()


def test_jobs_one_and_two_give_identical_output(tmp_path, run_cli):
    for i in range(60):
        log_softmax = "import tensorflow as tf\nx = tf.math.log(tf.nn.softmax(z))\n"
        (tmp_path / f"m{i:02d}.py").write_text(BAD if i % 3 else log_softmax)
    one = run_cli("--no-cache", "--jobs", "1", "--output-format", "json", ".")
    two = run_cli("--no-cache", "--jobs", "2", "--output-format", "json", ".")
    assert one.returncode == two.returncode == 1
    assert one.stdout == two.stdout and one.stdout.count('"code"') == 60
