"""The verifier against real TensorFlow (tensorflow-cpu), never a mock of it."""
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import replace

import pytest

pytest.importorskip("tensorflow", reason="the verifier tests need tensorflow-cpu (pip install '.[verify]')")

from verified import verdicts  # noqa: E402

from cliplint.analysis import lint_module  # noqa: E402
from cliplint.rules import ALL_RULES  # noqa: E402
from cliplint.verify import Session, sandbox, verify_findings  # noqa: E402

RULES = list(ALL_RULES.values())

PROGRAM = textwrap.dedent("""\
    import tensorflow as tf

    opt = tf.keras.optimizers.Adam(learning_rate=1e-3, clipnorm=1.0, clipvalue=0.5)

    def fit_then_clip(model, x, y):
        model.compile(optimizer="sgd", loss="mse")
        model.fit(x, y)
        model.optimizer.clipnorm = 1.0
        model.fit(x, y)

    def clip_before_fit(model, x, y):
        sgd = tf.keras.optimizers.SGD(1.0)
        model.compile(optimizer=sgd, loss="mse")
        sgd.clipnorm = 1.0
        model.fit(x, y)

    def step(model, x, labels):
        with tf.GradientTape() as tape:
            probs = tf.nn.softmax(model(x))
            loss = -tf.reduce_sum(labels * tf.math.log(probs))
        grads = tape.gradient(loss, model.trainable_variables)
        grads = [tf.clip_by_norm(g, 1.0) for g in grads]
        opt.apply_gradients(zip(grads, model.trainable_variables))

    def filtered(model, loss, tape):
        grads = tape.gradient(loss, model.trainable_variables)
        grads = [g for g in grads if g is not None]
        opt.apply_gradients(zip(grads, model.trainable_variables))
""")


@pytest.fixture(scope="module")
def verified():
    return verdicts("program.py", PROGRAM)


def test_every_finding_gets_a_verdict_with_versions(verified):
    assert set(verified) == {("CL001", 3), ("CL002", 8), ("CL002", 14), ("CL004", 20), ("CL003", 22),
                             ("CL005", 22), ("CL005", 28)}
    for verification in verified.values():
        assert verification["verdict"] in ("confirmed", "not-reproduced", "inconclusive", "skipped")
        assert verification["tensorflow"] and verification["keras"] and verification["flavour"]
        assert isinstance(verification["assumptions"], list)


def test_cl001_constructor_raises_in_keras3_or_drops_clipvalue_in_tf_keras(verified):
    v = verified[("CL001", 3)]
    assert v["verdict"] == "confirmed"
    if v["flavour"] == "Keras 3":
        expected = ("raises ValueError (message quoted from Keras: \"Only one of `clipnorm`, `clipvalue` and "
                    "`global_clipnorm` can be set")
        assert expected in v["evidence"]
    else:
        assert "`clipvalue` silently had no effect" in v["evidence"]


def test_cl002_after_fit_is_confirmed_with_the_weights(verified):
    v = verified[("CL002", 8)]
    assert v["verdict"] == "confirmed"
    assert "-199 -> 39601" in v["evidence"] and "unclipped" in v["evidence"]


def test_cl002_before_fit_is_not_reproduced(verified):
    v = verified[("CL002", 14)]
    assert v["verdict"] == "not-reproduced"
    assert "takes effect because no fit() ran before it" in v["evidence"]


def test_cl003_global_norm_and_cosine(verified):
    v = verified[("CL003", 22)]
    assert v["verdict"] == "confirmed"
    assert "global norm is 2 (> 1)" in v["evidence"] and "cosine 0.55" in v["evidence"]


def test_cl004_minus_inf_and_nan_gradient(verified):
    v = verified[("CL004", 20)]
    assert v["verdict"] == "confirmed"
    assert "-inf" in v["evidence"] and "NaN" in v["evidence"] and "[0, -100, -103]" in v["evidence"]


def test_cl005_none_raises_and_misalignment_is_silent(verified):
    unsafe = verified[("CL005", 22)]
    assert unsafe["verdict"] == "confirmed"
    assert "Attempt to convert a value (None)" in unsafe["evidence"]
    misaligned = verified[("CL005", 28)]
    assert misaligned["verdict"] == "confirmed"
    assert "v1 got v2's gradient" in misaligned["evidence"] and "raised nothing" in misaligned["evidence"]


KEYED = textwrap.dedent("""\
    import tensorflow as tf

    def inner_update(weights, loss, alpha=0.01):
        grads = dict(zip(weights.keys(), tf.gradients(loss, list(weights.values()))))
        return dict(zip(weights.keys(), [weights[key] - alpha * grads[key] for key in weights.keys()]))

    def indexed(model, tape, loss):
        grads = tape.gradient(loss, model.trainable_variables)
        for i in range(len(grads)):
            grads[i] = grads[i] * 0.5
        return grads
""")


def test_cl005_gradients_read_by_key_raise_on_none():
    """MAML's dict of gradients keyed like the weights, and a list indexed in turn: the worker
    binds the dict by the weights' keys, and one None raises where every tensor runs."""
    found = verdicts("keyed.py", KEYED)
    for line in (5, 10):
        assert found[("CL005", line)]["verdict"] == "confirmed", found
        assert "with every gradient a tensor it runs" in found[("CL005", line)]["evidence"]


PER_TENSOR_KEYED = textwrap.dedent("""\
    import tensorflow as tf

    def indexed(model, tape, loss, optimizer):
        listed = tape.gradient(loss, model.trainable_variables)
        clipped = [tf.clip_by_norm(listed[i], 1.0) for i in range(len(listed))]
        optimizer.apply_gradients(zip(clipped, model.trainable_variables))

    def by_name(model, tape, loss, optimizer):
        named = dict(zip([v.name for v in model.trainable_variables], tape.gradient(loss, model.trainable_variables)))
        clipped = [tf.clip_by_norm(named[key], 1.0) for key in named]
        optimizer.apply_gradients(zip(clipped, model.trainable_variables))
""")


def test_cl003_per_tensor_clip_of_gradients_read_by_key_is_confirmed():
    """The same probe roles for every rule that replays the loop (`flow.snippets.element_roles`)."""
    found = verdicts("per_tensor.py", PER_TENSOR_KEYED)
    for line in (5, 10):
        assert found[("CL003", line)]["verdict"] == "confirmed", found


def _finding(source):
    findings, _ = lint_module("x.py", textwrap.dedent(source), RULES)
    assert findings, source
    return findings[0]


def test_misaligned_lists_without_none_are_not_reproduced():
    """The zip is misaligned only when a None was removed: a probe whose filter removes nothing."""
    finding = _finding("""\
        import tensorflow as tf
        grads = tape.gradient(loss, model.trainable_variables)
        grads = [g for g in grads if g is not None and g is not 0]
        opt.apply_gradients(zip(grads, model.trainable_variables))
    """)
    probe = dict(finding.probe)
    # replay the filtering on a list that holds no None: every pair stays aligned
    probe["statements"] = [{"code": "grads = [g for g in grads if g is not None or g is None]",
                            "imports": {}, "constants": {}}]
    session = Session(timeout=120)
    try:
        verdict = session.verify(replace(finding, probe=probe))
    finally:
        session.close()
    assert verdict["verdict"] == "not-reproduced"


@pytest.mark.parametrize("source", [
    "import os, tensorflow as tf\nopt = tf.keras.optimizers.Adam(learning_rate=os.system('touch pwned'),"
    " clipnorm=1.0, clipvalue=0.5)\n",
    "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(learning_rate=open('pwned',"
    " 'w').write('x'), clipnorm=1.0, clipvalue=0.5)\n",
    "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(learning_rate=tf.io.write_file('pwned',"
    " 'x'), clipnorm=1.0, clipvalue=0.5)\n",
    "import tensorflow as tf\nopt ="
    " tf.keras.optimizers.Adam(learning_rate=__import__('os').system('touch pwned'), clipnorm=1.0,"
    " clipvalue=0.5)\n",
    "import tensorflow as tf, subprocess\nopt ="
    " tf.keras.optimizers.Adam(learning_rate=subprocess.call(['touch', 'pwned']), clipnorm=1.0,"
    " clipvalue=0.5)\n",
    "import tensorflow as tf\nopt ="
    " tf.keras.optimizers.Adam(learning_rate=tf.keras.utils.get_file('pwned', 'http://x'), clipnorm=1.0,"
    " clipvalue=0.5)\n",
    "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(learning_rate=(1).__class__.__bases__[0],"
    " clipnorm=1.0, clipvalue=0.5)\n",
])
def test_unsafe_snippets_are_never_executed(source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    finding = _finding(source)
    verification = verify_findings([finding], timeout=60)[0].verification
    assert verification["verdict"] == "skipped"
    assert verification["evidence"].startswith("not executed: ")
    assert not (tmp_path / "pwned").exists()


def test_timeout_makes_the_probe_inconclusive_and_a_new_worker_takes_the_rest():
    slow = _finding("import tensorflow as tf\n"
                    "opt = tf.keras.optimizers.Adam(learning_rate=sum(range(10**10)), clipnorm=1.0, clipvalue=0.5)\n")
    quick = _finding("import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    session = Session(timeout=3)
    try:
        session._worker()  # start (and import TensorFlow) outside the probe's time limit
        first = session.verify(slow)
        second = session.verify(quick)
    finally:
        session.close()
    assert first["verdict"] == "inconclusive" and "did not finish within 3 s" in first["evidence"]
    assert second["verdict"] == "confirmed"


def test_worker_crash_is_inconclusive_and_recovered():
    finding = _finding("import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    session = Session(timeout=120)
    try:
        session._worker().process.kill()
        session._worker().process.wait()
        crashed = session.verify(finding)
        recovered = session.verify(finding)
    finally:
        session.close()
    assert crashed["verdict"] == "inconclusive" and "new worker takes the rest" in crashed["evidence"]
    assert recovered["verdict"] == "confirmed"


def test_memory_limit_stops_unbounded_allocation(monkeypatch):
    monkeypatch.setenv("CLIPLINT_VERIFY_MEMORY", str(3 * 1024 ** 3))
    finding = _finding("import tensorflow as tf\n"
                       "opt = tf.keras.optimizers.Adam(learning_rate=len([0] * 10**11), clipnorm=1.0, clipvalue=0.5)\n")
    verification = verify_findings([finding], timeout=120)[0].verification
    assert verification["verdict"] == "inconclusive"
    assert "memory" in verification["evidence"]


def test_temporary_folder_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    finding = _finding("import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    verify_findings([finding], timeout=120)
    assert list(tmp_path.iterdir()) == []


def test_cli_verify_json_and_exit_status(tmp_path, run_cli):
    (tmp_path / "train.py").write_text(textwrap.dedent("""\
        import tensorflow as tf
        def configure(model, x, y):
            opt = tf.keras.optimizers.SGD(0.1)
            model.compile(optimizer=opt, loss="mse")
            opt.clipnorm = 1.0
            model.fit(x, y)
    """))
    result = run_cli("--verify", "--output-format", "json", "train.py")
    records = json.loads(result.stdout)
    assert records[0]["verification"]["verdict"] == "not-reproduced"
    assert set(records[0]["verification"]) >= {"verdict", "evidence", "assumptions", "tensorflow", "keras"}
    # a not-reproduced finding is printed but does not make the exit status 1
    assert result.returncode == 0
    text = run_cli("--verify", "train.py").stdout
    assert "[not-reproduced: " in text and "(1 not reproduced)" in text


def test_verify_without_tensorflow_says_how_to_install(tmp_path):
    (tmp_path / "a.py").write_text("import tensorflow as tf\n"
                                   "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    script = ("import importlib.util, sys\n"
              "real = importlib.util.find_spec\n"
              "importlib.util.find_spec = lambda name, *a: None if name == 'tensorflow' else real(name, *a)\n"
              "sys.argv = ['cliplint', '--verify', 'a.py']\n"
              "from cliplint.cli import main\nmain()\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 2
    assert "pip install '.[verify]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_plain_linting_never_imports_tensorflow(tmp_path):
    """`-X importtime` lists every module the real command imports, up to its exit."""
    (tmp_path / "a.py").write_text(PROGRAM)
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "cliplint", "a.py"], cwd=tmp_path,
                            capture_output=True, text=True)
    imported = [line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")]
    assert result.returncode == 1 and "CL001" in result.stdout
    assert "libcst" in imported, "the check must see the imports of a real lint"
    assert not [name for name in imported if name.split(".")[0] in ("tensorflow", "keras", "tf_keras")]


def test_tf_keras_flavour_names_itself_and_drops_clipvalue(tmp_path, run_cli):
    pytest.importorskip("tf_keras", reason="install tf-keras (--no-deps) to test the tf-keras flavour")
    (tmp_path / "a.py").write_text("import tensorflow as tf\n"
                                   "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    result = run_cli("--verify", "--output-format", "json", "a.py", env={"TF_USE_LEGACY_KERAS": "1"})
    verification = json.loads(result.stdout)[0]["verification"]
    assert verification["flavour"] == "tf-keras"
    assert verification["verdict"] == "confirmed"
    assert verification["evidence"].startswith("tf-keras 2.")
    assert "`clipvalue` silently had no effect" in verification["evidence"]


PROGRAM_FURTHER = textwrap.dedent("""\
    import tensorflow as tf

    def step(model, tape, loss, optimizer):
        grads = tape.gradient(loss, model.trainable_variables)
        grads = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    def step_unused(model, tape, loss, optimizer):
        grads = tape.gradient(loss, model.trainable_variables)
        clipped, _ = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    check = tf.add_check_numerics_ops()
    zeroing = tf.keras.optimizers.SGD(0.1, clipnorm=0.0)
    collapsed = tf.clip_by_value(g, 1.0, -1.0)
    classifier = tf.keras.Sequential([tf.keras.layers.Dense(3, activation="softmax")])
    classifier.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    gates = tf.nn.sigmoid(tf.matmul(h, w))
    xent = tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=gates)
    tagger = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="softmax")])
    tagger.compile(loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))
""")


@pytest.fixture(scope="module")
def verified_further():
    return verdicts("further.py", PROGRAM_FURTHER)


def test_further_rules_are_confirmed(verified_further):
    v = verified_further
    assert set(v) == {("CL006", 5), ("CL007", 11), ("CL008", 13), ("CL009", 14), ("CL009", 15), ("CL010", 17),
                      ("CL010", 19), ("CL010", 21)}
    assert all(x["verdict"] == "confirmed" for x in v.values()), v
    assert "Shapes of all inputs must match" in v[("CL006", 5)]["evidence"] or \
        "bad operand type for unary -: 'list'" in v[("CL006", 5)]["evidence"]
    assert "global norm 1005 (threshold 1)" in v[("CL007", 11)]["evidence"]
    assert "has no attribute 'add_check_numerics_ops'" in v[("CL008", 13)]["evidence"]
    assert "clipnorm=0 does not clip" in v[("CL009", 14)]["evidence"]
    assert "[0.5, 2, -2] became [1, 1, 1]" in v[("CL009", 15)]["evidence"]
    assert "softmax applied twice the loss is 1.55" in v[("CL010", 17)]["evidence"]
    # the two activations differ: a sigmoid before the op's softmax, a softmax before the loss's sigmoid
    assert "sigmoid applied before the loss's softmax the loss is 1.55 and the gradient norm 4.5e-05" \
        in v[("CL010", 19)]["evidence"]
    assert "softmax applied before the loss's sigmoid the loss is 0.9" in v[("CL010", 21)]["evidence"]


@pytest.mark.parametrize("source,reason", [
    ("import tensorflow as tf, socket\n"
     "opt = tf.keras.optimizers.Adam(learning_rate=socket.create_connection(('example.com', 80)),"
     " clipnorm=1.0, clipvalue=0.5)\n",
     "socket"),
    ("import tensorflow as tf, urllib.request\n"
     "opt = tf.keras.optimizers.Adam(learning_rate=urllib.request.urlopen('http://x').read(),"
     " clipnorm=1.0, clipvalue=0.5)\n",
     "urllib"),
    ("import tensorflow as tf\n"
     "opt = tf.keras.optimizers.Adam(learning_rate=tf.data.TextLineDataset('/etc/passwd'), clipnorm=1.0,"
     " clipvalue=0.5)\n",
     "tf.data"),
])
def test_network_and_file_access_is_never_executed(source, reason):
    verification = verify_findings([_finding(source)], timeout=60)[0].verification
    assert verification["verdict"] == "skipped" and reason in verification["evidence"]


def test_lambdas_are_refused_by_layer_1():
    finding = _finding("import tensorflow as tf\n"
                       "opt = tf.keras.optimizers.Adam(learning_rate=(lambda f: f(f))(lambda f: f(f)), clipnorm=1.0, "
                       "clipvalue=0.5)\n")
    verification = verify_findings([finding], timeout=60)[0].verification
    assert verification["verdict"] == "skipped" and "`Lambda` expression" in verification["evidence"]


def test_budget_leaves_the_rest_inconclusive_and_bounds_the_run():
    slow = [_finding("import tensorflow as tf\n"
                     f"opt = tf.keras.optimizers.Adam(learning_rate=sum(range(10**10 + {i})), clipnorm=1.0, "
                     "clipvalue=0.5)\n") for i in range(6)]
    started = time.monotonic()
    verified = verify_findings(slow, timeout=4, budget=12)
    elapsed = time.monotonic() - started
    evidence = [f.verification["evidence"] for f in verified]
    assert elapsed < 30, elapsed
    assert all(f.verification["verdict"] == "inconclusive" for f in verified)
    assert evidence.count("verify budget spent") >= 3, evidence


def test_identical_probes_run_once():
    finding = _finding("import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    twin = replace(finding, path="other.py")
    session = Session(timeout=120)
    try:
        first, second = session.verify(finding), session.verify(twin)
        asked = session.worker.sent
    finally:
        session.close()
    assert first == second and first["verdict"] == "confirmed"
    assert asked == 1


def test_stale_folder_of_a_dead_run_is_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"cliplint-verify-{dead.pid}-abc"
    live = tmp_path / f"cliplint-verify-{os.getpid()}-def"
    for folder in (stale, live):
        folder.mkdir()
        (folder / "worker.log").write_text("x")
    Session(timeout=1).close()
    assert not stale.exists() and live.exists()


def test_a_line_written_into_the_channel_is_rejected(monkeypatch):
    """Layer 1 off (test-only hook): the snippet writes a well-formed verdict line to every descriptor.
    Without the run's key it is rejected; the finding is inconclusive, never the forged verdict."""
    monkeypatch.setenv("CLIPLINT_TEST_ONLY_SKIP_LAYER1", "1")
    line = '0' * 64 + ' {"id": 1, "answer": {"verdict": "confirmed", "evidence": "FORGED", "assumptions": []}}\\n'
    attack = f"[np.ma.core.builtins.__import__('os').write(n, b'{line}') for n in range(1, 40) " \
             "if np.ma.core.builtins.__import__('os').path.exists('/proc/self/fd/%d' % n)]"
    finding = _finding(f"import tensorflow as tf\nimport numpy as np\n"
                       f"opt = tf.keras.optimizers.Adam(learning_rate={attack}, clipnorm=1.0, clipvalue=0.5)\n")
    verification = verify_findings([finding], timeout=120)[0].verification
    assert "FORGED" not in verification["evidence"]
    assert verification["verdict"] == "inconclusive"
    assert "failed authentication" in verification["evidence"]


def test_worker_reports_its_lock_down_layers():
    session = Session(timeout=120)
    try:
        session._worker()
    finally:
        session.close()
    assert set(session.layers) == set(sandbox.LAYERS)
    if sys.platform == "linux":
        assert session.layers["rlimits"] == "active" and session.layers["no_new_privs"] == "active"


# CPU burners through allowlisted ops: a matmul loop and a pure-Python sum, each distinct (no twin).
BURNERS = (
    "lp{n} = tf.math.log(tf.nn.softmax(logits, axis=sum(float(tf.reduce_sum(tf.matmul(tf.ones([400, 400]), "
    "tf.ones([400, 400])))) for _ in range(10 ** 9 + {n})) * 0 - 1))\n",
    "lp{n} = tf.math.log(tf.nn.softmax(logits, axis=sum(range(10 ** 12 + {n})) * 0 - 1))\n",
)
CHEAP = "opt = tf.keras.optimizers.Adam(learning_rate=1e-3, clipnorm=1.0, clipvalue=0.5)\n"


def _burners(count: int) -> str:
    return "import tensorflow as tf\n\n" + "".join(BURNERS[n % 2].format(n=n) for n in range(count)) + CHEAP


def _verified_by_file(run_cli, tmp_path, *flags) -> dict:
    (tmp_path / "other.py").write_text("import tensorflow as tf\n\n" + CHEAP)
    records = json.loads(run_cli("--verify", "--no-cache", "--output-format", "json", *flags, ".").stdout)
    found: dict = {}
    for record in records:
        found.setdefault(record["path"], []).append((record["code"], record["verification"]))
    return found


def test_cpu_burners_are_cut_per_finding_and_later_findings_are_still_verified(tmp_path, run_cli):
    (tmp_path / "burners.py").write_text(_burners(3))
    found = _verified_by_file(run_cli, tmp_path, "--verify-cpu", "2")
    burners = [v for code, v in found["burners.py"] if code == "CL004"]
    assert len(burners) == 3
    for verification in burners:
        assert verification["verdict"] == "inconclusive", verification
        assert verification["evidence"].startswith("the probe used more than 2 s of CPU (--verify-cpu)"), verification
    assert [v["verdict"] for code, v in found["burners.py"] if code == "CL001"] == ["confirmed"]
    assert [v["verdict"] for _, v in found["other.py"]] == ["confirmed"]


def test_a_file_budget_spent_leaves_only_that_file_unverified(tmp_path, run_cli):
    (tmp_path / "burners.py").write_text(_burners(2))
    found = _verified_by_file(run_cli, tmp_path, "--verify-cpu", "2", "--verify-file-budget", "3")
    evidence = [v["evidence"] for _, v in found["burners.py"]]
    assert evidence[0].startswith("the probe used more than 2 s of CPU"), evidence
    spent = "the file's verify budget is spent (3 s of CPU, --verify-file-budget)"
    assert evidence[1:] == [spent, spent], evidence
    assert [v["verdict"] for _, v in found["other.py"]] == ["confirmed"]


def test_a_5000_term_expression_is_skipped_with_a_reason():
    """Deeper than Python's parser takes (the linter itself gates such lines before any rule runs,
    so the finding's snippet is put in by hand): skipped in the parent with a reason, never a
    RecursionError that leaves no report."""
    finding = _finding("import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    terms = " + ".join(["1"] * 5000)
    call = {**finding.probe["call"], "code": f"tf.keras.optimizers.Adam(learning_rate=({terms}) * 1e-7, clipnorm=1.0)"}
    deep = replace(finding, probe={**finding.probe, "call": call})
    verification = verify_findings([deep], timeout=60)[0].verification
    assert verification["verdict"] == "skipped"
    assert verification["evidence"].startswith("not executed: it uses an expression nested too deeply"), verification


def test_an_expression_deeper_than_the_rebuild_is_skipped_through_the_command(tmp_path, run_cli):
    """300 terms: within what the linter parses, deeper than layer 1 rebuilds."""
    terms = " + ".join(["1"] * 300)
    (tmp_path / "deep.py").write_text("import tensorflow as tf\n\n"
                                      f"lp = tf.math.log(tf.nn.softmax(logits, axis={terms} - 301))\n")
    records = json.loads(run_cli("--verify", "--no-cache", "--output-format", "json", "deep.py").stdout)
    assert [(r["code"], r["verification"]["verdict"]) for r in records] == [("CL004", "skipped")]
    assert re.search(r"nested 3\d\d levels deep \(the verifier rebuilds at most 100\)",
                     records[0]["verification"]["evidence"]), records


def test_no_path_into_keras_deserialisation_is_allowlisted():
    """Layer 1 names no (de)serialising function and lets no snippet read one as an attribute."""
    from cliplint.verify.allowlist import ATTRIBUTES, SYMBOLS

    deserialising = {"get", "deserialize", "serialize", "from_config", "get_config", "load_model", "model_from_json"}
    assert not [s for s in SYMBOLS if s.rsplit(".", 1)[-1] in deserialising]
    assert not ATTRIBUTES & deserialising
