"""What each layer of `--verify`'s lock-down holds alone (SECURITY.md's table), and that a missing
layer makes `--verify` execute nothing unless the user passes --verify-unsandboxed.

Every run is the real `cliplint --verify` with real TensorFlow over files whose ordinary finding
(`Adam(learning_rate=<attack>, clipnorm=1.0, clipvalue=0.5)`, CL001) carries an attack, with layer 1
switched off (`CLIPLINT_TEST_ONLY_SKIP_LAYER1=1`) so that the snippets run as written, and the layers
of layer 2 that a column does not name switched off by the test-only hook
`CLIPLINT_TEST_ONLY_LAYERS_OFF` (honoured only while pytest runs a test, like the other hook).
The targets sit where an unprivileged user can reach them (folders 0755), so that the file modes,
not the test's own folders, decide what the unprivileged user may do. Runs as root (as CI often
does): then the worker's switch to nobody is one of the layers.
"""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("tensorflow", reason="the lock-down tests need tensorflow-cpu (pip install '.[verify]')")
pytest.importorskip("pyseccomp", reason="the lock-down tests need pyseccomp (pip install '.[verify]')")

from test_redteam import Listener, _processes_left  # noqa: E402

TOKEN = "sandbox-layers-4243"  # in the command line of every process an attack starts (not test_redteam's)

from cliplint.analysis import lint_module  # noqa: E402
from cliplint.rules import ALL_RULES  # noqa: E402
from cliplint.verify import Session, sandbox  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0,
                                reason="the table is measured on Linux as root (the CI image's user)")

ROOT = Path(__file__).resolve().parent.parent
SECRET = "LAYER-SECRET-90ab"
# The snippets name modules they import (a free name such as `open` would become a stand-in).
HEADER = "import os\nimport io\nimport ctypes\nimport socket\nimport subprocess\nimport time\nimport tensorflow as tf\n"

# name -> expression. {t}: the attack's own folder (0755, root's) holding `sentinel` (0644, root's);
# {w}: a world-writable folder; {s}: a secret (0600, root's); {p}: a local listener's port;
# {v}: the pid of a process of root's that a snippet tries to kill; {python}: a program to start
# (by its path: the worker's environment has no PATH; `sleep` would exit at once on the token).
ATTACKS = {
    "chmod": "os.chmod({t!r} + '/sentinel', 0o4777)",
    "fchmodat2": "ctypes.CDLL(None).syscall(452, -100, ({t!r} + '/sentinel').encode(), 0o4777, 0)",
    "utime": "os.utime({t!r} + '/sentinel', (1, 1))",
    "chown": "os.chown({t!r} + '/sentinel', 65534, 65534)",
    "setxattr": "os.setxattr({t!r} + '/sentinel', 'user.pwned', b'x')",
    "truncate": "os.truncate({t!r} + '/sentinel', 0)",
    "append": "io.open({t!r} + '/sentinel', 'a').write('x')",
    "link": "os.link({t!r} + '/sentinel', {t!r} + '/pwned-link')",
    "symlink": "os.symlink({t!r} + '/sentinel', {t!r} + '/pwned-symlink')",
    "mknod": "os.mknod({t!r} + '/pwned-node')",
    "rename": "os.rename({t!r} + '/sentinel', {t!r} + '/pwned-renamed')",
    "create": "io.open({t!r} + '/pwned-new', 'w').write('x')",
    "create_world_writable": "io.open({w!r} + '/pwned-world', 'w').write('x')",
    "read_secret": "float(len(io.open({s!r}).read()) > 0) * 1e-3",
    "connect": "socket.create_connection(('127.0.0.1', {p}))",
    "execute": "subprocess.Popen([{python!r}, '-c', 'import time; time.sleep(30)', '{token}'], start_new_session=True)",
    "fork": "os.fork() or (os.setsid(), time.sleep(30), os._exit(0))",
    "kill": "os.kill({v}, 9)",
}
# column -> the layers switched off (every other one stays on)
COLUMNS = {
    "all layers": (),
    "seccomp alone": ("network namespace", "unprivileged user", "landlock"),
    "Landlock alone": ("network namespace", "unprivileged user", "seccomp"),
    "network namespace alone": ("unprivileged user", "landlock", "seccomp"),
    "unprivileged user alone": ("network namespace", "landlock", "seccomp"),
    "no layer 2": ("no_new_privs", "network namespace", "unprivileged user", "capabilities dropped", "landlock",
                   "seccomp"),
}
HELD = "held"


def _expected() -> dict:
    """attack -> column -> held? The cells of SECURITY.md's table (checked against it below)."""
    table = _table()
    return {name: {column: cells[index] == HELD for index, column in enumerate(COLUMNS)}
            for name, cells in table.items()}


def _table() -> dict:
    text = (ROOT / "SECURITY.md").read_text()
    rows = {}
    for line in text.splitlines():
        match = re.match(r"^\| `([a-z_0-9]+)`", line)
        if match and match.group(1) in ATTACKS:
            rows[match.group(1)] = [cell.strip().strip("*") for cell in line.strip().strip("|").split("|")[1:]]
    return rows


def _sentinel_state(path: Path) -> tuple:
    info = os.lstat(path)
    return (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, info.st_size, info.st_nlink,
            info.st_ctime_ns == info.st_mtime_ns, os.listxattr(path), path.read_text())


def _left(scratch: Path) -> dict:
    """Processes attacks started: programs (TOKEN in the command line), copies of a worker (its folder)."""
    left = _processes_left(scratch, TOKEN)
    return {"execute": [entry for entry in left if TOKEN in entry],
            "fork": [entry for entry in left if TOKEN not in entry]}


def _run_column(column: str) -> dict:
    """One cliplint run over every attack, with the column's layers only; what each attack did."""
    root = Path(tempfile.mkdtemp(prefix="cliplint-layers-"))
    os.chmod(root, 0o755)  # reachable by nobody: the modes below decide
    repo, world, scratch = root / "repo", root / "world", root / "scratch"
    for folder in (repo, world, scratch):
        folder.mkdir()
    os.chmod(world, 0o1777)
    secret = root / "secret.txt"
    secret.write_text(SECRET)
    os.chmod(secret, 0o600)
    listener = Listener()
    victim = subprocess.Popen(["sleep", "300"])
    before = {}
    try:
        for name, expression in ATTACKS.items():
            target = root / f"target-{name}"
            target.mkdir()
            (target / "sentinel").write_text("sentinel")
            before[name] = _sentinel_state(target / "sentinel")
            filled = expression.format(t=str(target), w=str(world), s=str(secret), p=listener.port, v=victim.pid,
                                       token=TOKEN, python=sys.executable)
            (repo / f"attack_{name}.py").write_text(
                f"{HEADER}opt = tf.keras.optimizers.Adam(learning_rate={filled}, clipnorm=1.0, clipvalue=0.5)\n")
        environment = {**os.environ, "NO_COLOR": "1", "TMPDIR": str(scratch), "CLIPLINT_TEST_ONLY_SKIP_LAYER1": "1",
                       "CLIPLINT_TEST_ONLY_LAYERS_OFF": ",".join(COLUMNS[column])}
        command = [sys.executable, "-m", "cliplint", "--verify", "--verify-unsandboxed", "--output-format", "json",
                   "--verify-timeout", "20", "--no-cache", "."]
        result = subprocess.run(command, cwd=repo, env=environment, capture_output=True, text=True, timeout=600)
        time.sleep(0.5)  # a process an attack detached would still be there
        left = _left(scratch)
        for entry in left["execute"] + left["fork"]:
            os.kill(int(entry.split(":")[0]), signal.SIGKILL)
        records = json.loads(result.stdout)
        verdicts = {Path(r["path"]).stem[len("attack_"):]: r["verification"]["verdict"] for r in records}
        evidence = {Path(r["path"]).stem[len("attack_"):]: r["verification"]["evidence"] for r in records}
        return {"result": result, "before": before, "root": root, "world": world, "listener": listener,
                "victim": victim.poll() is None, "left": left, "verdicts": verdicts,
                "evidence": evidence}
    finally:
        victim.kill()
        victim.wait()
        listener.server.close()


def _held(run: dict, name: str) -> bool:
    """Whether the attack `name` achieved nothing (its own oracle)."""
    target = run["root"] / f"target-{name}"
    if name == "create_world_writable":
        return not (run["world"] / "pwned-world").exists()
    if name == "read_secret":
        return run["verdicts"][name] != "confirmed"  # a read that works makes a valid Adam, confirmed
    if name == "connect":
        return run["listener"].accepted == 0
    if name == "kill":
        return run["victim"]
    if name in ("execute", "fork"):
        return not run["left"][name]
    unchanged = (target / "sentinel").exists() and _sentinel_state(target / "sentinel") == run["before"][name]
    return unchanged and not list(target.glob("pwned*"))


@pytest.fixture(scope="module", params=list(COLUMNS))
def column_run(request):
    run = _run_column(request.param)
    yield request.param, run
    subprocess.run(["rm", "-rf", str(run["root"])], check=False)


def test_each_layer_holds_what_the_table_says(column_run):
    column, run = column_run
    assert run["result"].returncode in (0, 1), run["result"].stderr[-2000:]
    assert set(run["verdicts"]) == set(ATTACKS), run["result"].stderr[-2000:]
    expected = _expected()
    measured = {name: _held(run, name) for name in ATTACKS}
    wrong = {name: (expected[name][column], held) for name, held in measured.items() if held != expected[name][column]}
    assert not wrong, f"{column}: attack -> (the table says held, measured held): {wrong}"
    for name in ATTACKS:  # every snippet ran, in a worker
        assert run["verdicts"][name] in ("confirmed", "inconclusive"), (name, run["verdicts"][name])
        assert "could not be started" not in run["evidence"][name], (name, run["evidence"][name])


def test_the_table_has_a_row_for_every_attack_and_a_cell_for_every_column():
    table = _table()
    assert set(table) == set(ATTACKS)
    assert all(len(cells) == len(COLUMNS) and set(cells) <= {HELD, "not held"} for cells in table.values()), table
    header = next(line for line in (ROOT / "SECURITY.md").read_text().splitlines() if line.startswith("| Attack"))
    assert [cell.strip() for cell in header.strip().strip("|").split("|")[1:]] == list(COLUMNS)


def _finding(source: str):
    findings, _ = lint_module("train.py", source, list(ALL_RULES.values()))
    return [f for f in findings if f.code == "CL001"][0]


@pytest.mark.parametrize("layer", ["seccomp", "landlock", "network namespace", "unprivileged user",
                                   "capabilities dropped", "no_new_privs"])
def test_a_missing_layer_executes_nothing_and_says_which(layer, tmp_path, run_cli):
    marker = tmp_path / "marker"
    (tmp_path / "train.py").write_text(
        f"{HEADER}opt = tf.keras.optimizers.Adam(learning_rate=io.open({str(marker)!r}, 'w').write('x'), "
        "clipnorm=1.0, clipvalue=0.5)\n")
    result = run_cli("--verify", "--output-format", "json", "train.py",
                     env={"CLIPLINT_TEST_ONLY_LAYERS_OFF": layer, "CLIPLINT_TEST_ONLY_SKIP_LAYER1": "1",
                          "CLIPLINT_CACHE_DIR": str(tmp_path / "cache")})
    records = json.loads(result.stdout)
    assert [r["code"] for r in records] == ["CL001"]  # still reported, as found statically
    verification = records[0]["verification"]
    assert verification["verdict"] == "skipped"
    assert verification["evidence"].startswith("not executed: the lock-down is incomplete here, unavailable: ")
    assert f"{layer} (switched off by the test-only hook)" in verification["evidence"]
    assert "--verify-unsandboxed" in verification["evidence"]
    assert "executed no snippet" in result.stderr and layer in result.stderr
    assert result.returncode == 1
    assert not marker.exists()


def test_with_the_opt_in_a_missing_layer_is_warned_about_and_snippets_run(tmp_path, run_cli):
    (tmp_path / "train.py").write_text("import tensorflow as tf\n"
                                       "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    result = run_cli("--verify", "--verify-unsandboxed", "--output-format", "json", "train.py",
                     env={"CLIPLINT_TEST_ONLY_LAYERS_OFF": "landlock", "CLIPLINT_CACHE_DIR": str(tmp_path / "cache")})
    assert json.loads(result.stdout)[0]["verification"]["verdict"] == "confirmed"
    assert "lock-down unavailable here: landlock (switched off by the test-only hook)" in result.stderr


def test_the_layers_hook_is_ignored_outside_pytest(tmp_path):
    """Without PYTEST_CURRENT_TEST (a plain run), the hook switches nothing off."""
    (tmp_path / "train.py").write_text("import tensorflow as tf\n"
                                       "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    environment = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    environment.update(CLIPLINT_TEST_ONLY_LAYERS_OFF="seccomp,landlock", CLIPLINT_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run([sys.executable, "-m", "cliplint", "--verify", "--output-format", "json", "train.py"],
                            cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600)
    assert json.loads(result.stdout)[0]["verification"]["verdict"] == "confirmed"
    assert "lock-down" not in result.stderr


def test_off_linux_no_worker_starts_and_nothing_runs(monkeypatch):
    """macOS and Windows have none of layer 2: the session refuses before starting TensorFlow."""
    monkeypatch.setattr(sys, "platform", "darwin")
    session = Session(timeout=60)
    try:
        verification = session.verify(_finding("import tensorflow as tf\n"
                                                "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n"))
        assert session.worker is None
    finally:
        session.close()
    assert verification["verdict"] == "skipped"
    assert "seccomp (not Linux (darwin))" in verification["evidence"]
    assert "landlock (not Linux (darwin))" in verification["evidence"]


def test_the_worker_runs_as_nobody_with_no_capability_and_the_allowlist():
    """Started as root: uid and gid 65534, no supplementary group, no capability, seccomp in filter
    mode, no_new_privs; the Python installation stays importable (lazy imports)."""
    session = Session(timeout=120)
    try:
        status = Path(f"/proc/{session._worker().process.pid}/status").read_text()
    finally:
        session.close()
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert fields["Uid"].split() == ["65534"] * 4 and fields["Gid"].split() == ["65534"] * 4
    assert fields["Groups"].strip() == ""
    assert {fields[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")} == {"0000000000000000"}
    assert fields["Seccomp"].strip() == "2" and fields["NoNewPrivs"].strip() == "1"
    assert set(session.layers.values()) == {"active"}


def test_the_allowlist_names_real_calls_and_keeps_the_argument_filters():
    import pyseccomp

    for name in (*sandbox.ALLOWED_SYSCALLS, *sandbox.FILTERED_SYSCALLS, *sandbox.NOT_IMPLEMENTED):
        if name not in ("time", "getdents", "stat", "lstat", "open", "poll"):  # not on every architecture
            assert pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) >= 0, name
    forbidden = {"execve", "execveat", "fork", "vfork", "socket", "chmod", "fchmod", "fchmodat", "fchmodat2",
                 "chown", "fchown", "fchownat", "lchown", "utime", "utimes", "utimensat", "futimesat", "setxattr",
                 "fsetxattr", "lsetxattr", "truncate", "ftruncate", "link", "linkat", "symlink", "symlinkat", "mknod",
                 "mknodat", "rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir",
                 "ptrace", "process_vm_writev", "mount", "unshare", "setns", "bpf", "io_uring_setup", "setuid",
                 "capset", "memfd_create", "creat"}
    assert not forbidden & set(sandbox.ALLOWED_SYSCALLS + sandbox.FILTERED_SYSCALLS)


def test_a_worker_folder_below_a_folder_nobody_cannot_enter_still_works(tmp_path, run_cli):
    """pytest's own folders (and many CI temporary folders) are 0700: the worker, become nobody,
    still reaches its folder (mounted again in its view) and TensorFlow starts."""
    scratch = tmp_path / "private" / "tmp"
    scratch.mkdir(parents=True)
    os.chmod(tmp_path / "private", 0o700)
    (tmp_path / "train.py").write_text("import tensorflow as tf\n"
                                       "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    result = run_cli("--verify", "--no-cache", "--output-format", "json", "train.py", env={"TMPDIR": str(scratch)})
    assert json.loads(result.stdout)[0]["verification"]["verdict"] == "confirmed", result.stdout
    assert list(scratch.iterdir()) == []
