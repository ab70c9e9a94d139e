"""A plain `cliplint .` (no --verify) in a checkout a stranger's pull request shipped.

Each test builds the checkout as the pull request would (links in `.cliplint_cache/`, planted
entries, FIFOs and links to `/dev/zero`, a pyproject.toml with `fix = true`), runs the installed
command in it, and checks that nothing outside the checkout was created or changed, that real
findings are still reported and planted ones are not, and the exit code. The per-user key lives
in a folder of the test's own (`XDG_CACHE_HOME`), outside the checkout.
"""
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from command import run_in_process

from cliplint.cache import KEY_NAME, MAC_CHARS

BAD = "import tensorflow as tf\nx = tf.math.log(tf.nn.softmax(z))\n"  # CL004, safely fixable
CLEAN = "import tensorflow as tf\nx = tf.nn.log_softmax(z)\n"
FAKE = {"path": "clean.py", "line": 1, "column": 1, "end_line": 1, "end_column": 2, "code": "CL001",
        "name": "conflicting-clip-options", "severity": "error", "message": "planted by the pull request",
        "probe": None, "verification": {"verdict": "confirmed", "evidence": "TensorFlow 2.21.0: planted"}}


class Checkout:
    """A checkout in `tmp/checkout`, a sentinel folder outside it, and the user's key folder."""

    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "checkout"
        self.outside = tmp / "outside"
        self.home = tmp / "home-cache"
        for folder in (self.root, self.outside, self.home):
            folder.mkdir()
        self.sentinel = self.outside / "sentinel.txt"
        self.sentinel.write_text("the victim's file\n")
        os.utime(self.sentinel, (1_000_000_000, 1_000_000_000))
        self.before = self._outside_state()

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def run(self, *args: str, last_run: bool = False, hang_possible: bool = False):
        """The command, in this process; in a process of its own with a timeout when
        `hang_possible` (a FIFO: the timeout only turns a hang into a failure, it times nothing).
        The entry holding the last run by file (`cache.LastRun`) is removed first unless
        `last_run`: these tests attack the files' own entries, which it would answer for."""
        if not last_run:
            for entry in self.entries(files_only=False):
                if entry not in self.entries():
                    entry.unlink()
        if not hang_possible:
            return run_in_process(args, self.root, env={"XDG_CACHE_HOME": str(self.home), "CLIPLINT_CACHE_DIR": None})
        env = {**os.environ, "NO_COLOR": "1", "XDG_CACHE_HOME": str(self.home)}
        env.pop("CLIPLINT_CACHE_DIR", None)
        return subprocess.run([sys.executable, "-m", "cliplint", *args], cwd=self.root, env=env,
                              capture_output=True, text=True, timeout=300)

    def _outside_state(self) -> dict:
        return {str(p): (p.lstat().st_mtime_ns, p.read_bytes() if p.is_file() else None)
                for p in sorted(self.outside.rglob("*"))}

    def assert_outside_untouched(self) -> None:
        assert self._outside_state() == self.before
        assert self.sentinel.read_text() == "the victim's file\n"

    def entries(self, store: str = "results", files_only: bool = True) -> list:
        """The store's entries (results: the files' own, not the last run's, unless not `files_only`)."""
        found = sorted(p for p in (self.root / ".cliplint_cache" / store).rglob("*.json") if p.is_file())
        return [p for p in found if not (files_only and store == "results" and _last_run_entry(p))]


def _last_run_entry(entry: Path) -> bool:
    """`cache.LastRun`'s entry: a file's own is empty or `{"findings": ...}` after its MAC."""
    try:
        body = entry.read_bytes()[64:]
    except OSError:  # a FIFO or a link planted by a test: not ours
        return False
    return bool(body) and not body.startswith(b'{"findings"')


@pytest.fixture
def checkout(tmp_path) -> Checkout:
    return Checkout(tmp_path)


def codes(result) -> list:
    return sorted(f["code"] for f in json.loads(result.stdout))


def cache_warnings(result) -> list:
    return [line for line in result.stderr.splitlines() if "not using the cache" in line]


# --- 1. links in the cache folder ------------------------------------------------------------

def test_a_dangling_gitignore_link_creates_nothing_outside(checkout):
    checkout.write("bad.py", BAD)
    (checkout.root / ".cliplint_cache").mkdir()
    (checkout.root / ".cliplint_cache" / ".gitignore").symlink_to(checkout.outside / "created-by-cliplint")
    result = checkout.run("--output-format", "json", ".")
    assert result.returncode == 1 and codes(result) == ["CL004"]
    assert not (checkout.outside / "created-by-cliplint").exists()
    checkout.assert_outside_untouched()
    assert checkout.entries(), "the folder is the user's own: the cache is still used"


def test_a_cachedir_tag_link_does_not_overwrite_the_file_it_points_to(checkout):
    checkout.write("bad.py", BAD)
    (checkout.root / ".cliplint_cache").mkdir()
    (checkout.root / ".cliplint_cache" / "CACHEDIR.TAG").symlink_to(checkout.sentinel)
    result = checkout.run(".")
    assert result.returncode == 1 and "CL004" in result.stdout
    checkout.assert_outside_untouched()


@pytest.mark.parametrize("linked", [".cliplint_cache", ".cliplint_cache/results"])
def test_a_linked_cache_folder_is_refused_with_one_warning(checkout, linked):
    checkout.write("bad.py", BAD)
    (checkout.root / linked).parent.mkdir(exist_ok=True)
    (checkout.root / linked).symlink_to(checkout.outside, target_is_directory=True)
    for _ in range(2):  # the second run would read what the first one wrote there
        result = checkout.run("--output-format", "json", ".")
        assert result.returncode == 1 and codes(result) == ["CL004"]
        assert cache_warnings(result) == [f"cliplint: warning: not using the cache: {linked} is a symbolic link; "
                                          "linting without it (remove it, or pass --cache-dir or --no-cache)"]
        assert "Traceback" not in result.stderr
    checkout.assert_outside_untouched()


def test_a_link_above_the_cache_folder_inside_the_checkout_is_refused(checkout):
    checkout.write("bad.py", BAD)
    (checkout.root / "build").symlink_to(checkout.outside, target_is_directory=True)
    result = checkout.run("--cache-dir", "build/cache", ".")
    assert result.returncode == 1 and "CL004" in result.stdout
    assert cache_warnings(result) and "build is a symbolic link" in result.stderr
    checkout.assert_outside_untouched()


def test_linked_entry_subfolders_send_nothing_elsewhere(checkout):
    """All 256 two-hex-digit subfolders shipped as links: every entry would land outside."""
    checkout.write("bad.py", BAD)
    checkout.write("clean.py", CLEAN)
    results = checkout.root / ".cliplint_cache" / "results"
    results.mkdir(parents=True)
    for number in range(256):
        (results / f"{number:02x}").symlink_to(checkout.outside, target_is_directory=True)
    for _ in range(2):
        result = checkout.run("--output-format", "json", ".")
        assert result.returncode == 1 and codes(result) == ["CL004"]
    checkout.assert_outside_untouched()


def test_a_file_where_the_cache_folder_should_be_is_refused(checkout):
    checkout.write("bad.py", BAD)
    checkout.write(".cliplint_cache", "not a folder\n")
    result = checkout.run(".")
    assert result.returncode == 1 and "CL004" in result.stdout
    assert ".cliplint_cache is not a folder" in result.stderr
    assert (checkout.root / ".cliplint_cache").read_text() == "not a folder\n"


def test_a_cache_folder_others_can_write_is_refused(checkout):
    checkout.write("bad.py", BAD)
    (checkout.root / ".cliplint_cache").mkdir()
    (checkout.root / ".cliplint_cache").chmod(0o777)
    result = checkout.run(".")
    assert result.returncode == 1 and "CL004" in result.stdout
    assert ".cliplint_cache is open to other users (mode 777)" in result.stderr
    assert list((checkout.root / ".cliplint_cache").iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_cache_folder_of_another_user_is_refused(checkout):
    checkout.write("bad.py", BAD)
    (checkout.root / ".cliplint_cache").mkdir()
    os.chown(checkout.root / ".cliplint_cache", 4321, 4321)
    result = checkout.run(".")
    assert result.returncode == 1 and "CL004" in result.stdout
    assert ".cliplint_cache belongs to another user (uid 4321)" in result.stderr
    assert list((checkout.root / ".cliplint_cache").iterdir()) == []


def test_an_entry_hard_linked_to_a_file_outside_is_replaced_not_written_through(checkout):
    checkout.write("bad.py", BAD)
    checkout.run(".")
    [entry] = checkout.entries()
    entry.unlink()
    os.link(checkout.sentinel, entry)
    result = checkout.run("--output-format", "json", ".")
    assert result.returncode == 1 and codes(result) == ["CL004"]
    checkout.assert_outside_untouched()
    assert entry.stat().st_ino != checkout.sentinel.stat().st_ino


def test_a_fifo_planted_as_an_entry_does_not_block(checkout):
    checkout.write("bad.py", BAD)
    checkout.run(".")
    [entry] = checkout.entries()
    entry.unlink()
    os.mkfifo(entry)
    result = checkout.run("--output-format", "json", ".", hang_possible=True)
    assert result.returncode == 1 and codes(result) == ["CL004"]


# --- 1. the per-user key ----------------------------------------------------------------------

def test_the_key_is_made_private_and_outside_the_checkout(checkout):
    checkout.write("bad.py", BAD)
    checkout.run(".")
    key = checkout.home / "cliplint" / KEY_NAME
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_size == 32
    assert stat.S_IMODE((checkout.home / "cliplint").stat().st_mode) == 0o700


@pytest.mark.parametrize("dangling", [True, False])
def test_a_key_file_replaced_by_a_link_is_refused(checkout, dangling):
    checkout.write("bad.py", BAD)
    (checkout.home / "cliplint").mkdir(mode=0o700)
    target = checkout.outside / "chosen-key" if dangling else checkout.sentinel
    (checkout.home / "cliplint" / KEY_NAME).symlink_to(target)
    result = checkout.run("--output-format", "json", ".")
    assert result.returncode == 1 and codes(result) == ["CL004"]
    assert f"{KEY_NAME} is a symbolic link" in result.stderr and len(cache_warnings(result)) == 1
    checkout.assert_outside_untouched()
    assert checkout.entries() == []


def test_a_key_others_can_read_is_refused(checkout):
    checkout.write("bad.py", BAD)
    checkout.run(".")
    (checkout.home / "cliplint" / KEY_NAME).chmod(0o644)
    result = checkout.run(".")
    assert result.returncode == 1 and "CL004" in result.stdout
    assert "is open to other users (mode 644)" in result.stderr


# --- 2. planted entries -----------------------------------------------------------------------

def _plant(entry: Path, body: bytes, mac: bytes = b"0" * MAC_CHARS) -> None:
    entry.write_bytes(mac + body)


@pytest.mark.parametrize("planted", [
    b"",  # the old format's "nothing found": an empty file
    b"0" * MAC_CHARS,  # a made-up MAC of "nothing found"
    json.dumps({"findings": [], "crashed": False}).encode(),  # JSON without a MAC
    b"0" * MAC_CHARS + json.dumps({"findings": [], "crashed": False}).encode(),
])
def test_a_planted_entry_does_not_hide_a_real_finding(checkout, planted):
    checkout.write("bad.py", BAD)
    checkout.run(".")
    [entry] = checkout.entries()
    entry.write_bytes(planted)
    result = checkout.run("--output-format", "json", ".")
    assert result.returncode == 1 and codes(result) == ["CL004"]


def test_a_planted_entry_does_not_inject_a_confirmed_finding(checkout):
    checkout.write("clean.py", CLEAN)
    assert checkout.run(".").returncode == 0
    [entry] = checkout.entries()
    _plant(entry, json.dumps({"findings": [FAKE], "crashed": False}).encode())
    result = checkout.run("--output-format", "json", ".")
    assert result.returncode == 0 and json.loads(result.stdout) == []
    assert "planted" not in result.stdout


def test_a_planted_last_run_does_not_inject_a_confirmed_finding(checkout):
    """The entry holding the whole run (`cache.LastRun`), rewritten to report a finding on the
    clean file with the stat the file really has: its MAC no longer matches, so it is a miss."""
    checkout.write("clean.py", CLEAN)
    assert checkout.run(".", last_run=True).returncode == 0
    [entry] = [e for e in checkout.entries(files_only=False) if e not in checkout.entries()]
    data = entry.read_bytes()
    remembered = json.loads(data[64:])
    remembered["clean.py"][3] = [FAKE]
    entry.write_bytes(data[:64] + json.dumps(remembered).encode())
    result = checkout.run("--output-format", "json", ".", last_run=True)
    assert result.returncode == 0 and json.loads(result.stdout) == []


def test_an_authentic_entry_copied_to_another_name_is_a_miss(checkout):
    """The clean file's entry is a valid MAC of "nothing found", but for its own name only."""
    checkout.write("clean.py", CLEAN)
    checkout.run(".")
    [clean_entry] = checkout.entries()
    checkout.write("bad.py", BAD)
    checkout.run(".")
    [bad_entry] = [e for e in checkout.entries() if e != clean_entry]
    bad_entry.write_bytes(clean_entry.read_bytes())
    result = checkout.run("--output-format", "json", ".")
    assert result.returncode == 1 and codes(result) == ["CL004"]


def test_an_entry_with_a_truncated_mac_or_a_changed_body_is_a_miss(checkout):
    checkout.write("bad.py", BAD)
    checkout.run(".")
    [entry] = checkout.entries()
    real = entry.read_bytes()
    for forged in (real[:MAC_CHARS - 1] + real[MAC_CHARS:], real[:MAC_CHARS] + b'{"findings": [], "crashed": false}',
                   real[:MAC_CHARS]):
        entry.write_bytes(forged)
        result = checkout.run("--output-format", "json", ".")
        assert result.returncode == 1 and codes(result) == ["CL004"]


def test_entries_written_under_another_key_are_misses(checkout, tmp_path):
    """A checkout shipping a cache filled on another machine (or by another user): other key."""
    checkout.write("bad.py", BAD)
    checkout.run(".")
    [entry] = checkout.entries()
    real = entry.read_bytes()
    (checkout.home / "cliplint" / KEY_NAME).unlink()  # a new user key: the old entries are strangers'
    entry.write_bytes(real[:MAC_CHARS])  # "nothing found", authentic under the old key
    result = checkout.run("--output-format", "json", ".")
    assert result.returncode == 1 and codes(result) == ["CL004"]


def test_a_planted_verdict_entry_is_a_miss(checkout, monkeypatch):
    """The verdict store shares the result store's storage: a planted verdict fails its MAC."""
    from cliplint.cache import open_store
    from cliplint.verify.verdicts import VerdictCache

    monkeypatch.chdir(checkout.root)
    monkeypatch.setenv("XDG_CACHE_HOME", str(checkout.home))
    verdict = {"verdict": "confirmed", "evidence": "real", "assumptions": [], "tensorflow": "2.21.0",
               "keras": "3", "flavour": "Keras 3"}
    cache = VerdictCache(".cliplint_cache")
    cache.put("probe", verdict)
    assert cache.get("probe") == verdict
    [entry] = checkout.entries("verdicts")
    _plant(entry, json.dumps({**verdict, "evidence": "planted"}).encode())
    assert cache.get("probe") is None
    store, _ = open_store(".cliplint_cache", "results")
    assert store.read(entry.parent.name + entry.stem) is None  # a verdict is not a result


def test_a_linked_verdicts_folder_writes_nothing_outside(checkout, monkeypatch):
    from cliplint.verify.verdicts import VerdictCache

    monkeypatch.chdir(checkout.root)
    monkeypatch.setenv("XDG_CACHE_HOME", str(checkout.home))
    (checkout.root / ".cliplint_cache").mkdir()
    (checkout.root / ".cliplint_cache" / "verdicts").symlink_to(checkout.outside, target_is_directory=True)
    cache = VerdictCache(".cliplint_cache")
    cache.put("probe", {"verdict": "confirmed"})
    assert cache.get("probe") is None
    checkout.assert_outside_untouched()


# --- 3. unbounded and blocking reads ----------------------------------------------------------

@pytest.mark.parametrize("name", ["train.py", "notebook.ipynb", "config.yaml", "settings.json", "model.keras"])
def test_a_link_to_dev_zero_is_not_read(checkout, name):
    checkout.write("bad.py", BAD)
    (checkout.root / name).symlink_to("/dev/zero")
    result = checkout.run("--output-format", "json", ".")
    found = json.loads(result.stdout)
    assert result.returncode == 1 and sorted((f["path"], f["code"]) for f in found) == sorted(
        [("bad.py", "CL004"), (name, "CL000")])
    assert "not a regular file" in next(f["message"] for f in found if f["path"] == name)


@pytest.mark.parametrize("name", ["train.py", "model.keras", "config.yml"])
def test_a_fifo_does_not_block_the_run(checkout, name):
    checkout.write("bad.py", BAD)
    os.mkfifo(checkout.root / name)
    for args in ((".",), ("--no-cache", name, "bad.py")):
        result = checkout.run("--output-format", "json", *args, hang_possible=True)
        assert result.returncode == 1, result.stderr
        assert ("not a regular file" in result.stdout) and "CL004" in result.stdout
    result = checkout.run("--fix", ".", hang_possible=True)
    assert result.returncode == 1 and "not a regular file" in result.stdout
    assert "log_softmax" in (checkout.root / "bad.py").read_text()


def test_gitignore_and_pyproject_links_to_dev_zero_or_fifos_are_not_read(checkout):
    checkout.write("pkg/bad.py", BAD)
    (checkout.root / ".gitignore").symlink_to("/dev/zero")
    (checkout.root / "pkg" / ".gitignore").symlink_to("/dev/zero")
    (checkout.root / "pkg" / "pyproject.toml").symlink_to("/dev/zero")
    checkout.write("fifo/bad.py", BAD)
    os.mkfifo(checkout.root / "fifo" / ".gitignore")
    result = checkout.run("--output-format", "json", ".", hang_possible=True)
    assert result.returncode == 1 and codes(result) == ["CL004", "CL004"]


def test_an_explicit_config_that_is_a_fifo_is_a_config_error(checkout):
    checkout.write("bad.py", BAD)
    os.mkfifo(checkout.root / "cliplint.toml")
    result = checkout.run("--config", "cliplint.toml", ".", hang_possible=True)
    assert result.returncode == 2
    assert "cliplint.toml: cannot read: not a regular file" in result.stderr and "Traceback" not in result.stderr


def test_a_file_whose_size_lies_is_read_only_up_to_the_limit(checkout):
    """/proc files say they are 0 bytes long, and are longer: the limit holds whatever stat says."""
    checkout.write("pyproject.toml", "[tool.cliplint]\nmax-file-size = 64\n")
    (checkout.root / "maps.py").symlink_to("/proc/self/maps")
    result = checkout.run("--output-format", "json", "maps.py")
    [finding] = json.loads(result.stdout)
    assert finding["code"] == "CL000" and "above max-file-size (64)" in finding["message"]


# --- 6. fix = true in the checkout's settings -------------------------------------------------

FORMATS = ["json", "json-lines", "sarif", "github", "gitlab", "junit"]


@pytest.mark.parametrize("output_format", FORMATS)
def test_a_machine_format_ignores_fix_true_from_the_checkout(checkout, output_format):
    checkout.write("pyproject.toml", "[tool.cliplint]\nfix = true\nunsafe-fixes = true\n")
    bad = checkout.write("bad.py", BAD)
    result = checkout.run("--output-format", output_format, ".")
    assert result.returncode == 1 and "CL004" in result.stdout
    assert bad.read_text() == BAD


def test_the_text_format_obeys_fix_true_and_exit_non_zero_on_fix_fails_the_check(checkout):
    checkout.write("pyproject.toml", "[tool.cliplint]\nfix = true\n")
    bad = checkout.write("bad.py", BAD)
    result = checkout.run("--exit-non-zero-on-fix", ".")
    assert bad.read_text() != BAD and "log_softmax" in bad.read_text()
    assert result.returncode == 1 and "Fixed 1 problem (0 remaining)" in result.stdout
    assert checkout.run("--exit-non-zero-on-fix", ".").returncode == 0  # nothing left to fix


def test_no_fix_overrides_fix_true(checkout):
    checkout.write("pyproject.toml", "[tool.cliplint]\nfix = true\n")
    bad = checkout.write("bad.py", BAD)
    result = checkout.run("--no-fix", ".")
    assert result.returncode == 1 and bad.read_text() == BAD


def test_an_explicit_fix_with_a_machine_format_fixes_and_reports_what_remains(checkout):
    bad = checkout.write("bad.py", BAD)
    result = checkout.run("--fix", "--output-format", "json", ".")
    assert result.returncode == 0 and json.loads(result.stdout) == [] and "log_softmax" in bad.read_text()
    assert "Fixed 1 problem" in result.stderr
    bad.write_text(BAD)
    assert checkout.run("--fix", "--exit-non-zero-on-fix", "--output-format", "json", ".").returncode == 1
    bad.write_text(BAD)
    assert checkout.run("--fix-only", "--exit-non-zero-on-fix", "--exit-zero", ".").returncode == 0
