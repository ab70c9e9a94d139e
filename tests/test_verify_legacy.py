"""`--verify` on TF 1-era and Keras 2 code, against real TensorFlow: the migration shim
(compat.v1 names, the legacy Keras backend, renamed optimizer arguments, placeholder and layer
stand-ins), role stand-ins, both Keras flavours, the verdict cache and the progress line. Every
substitution must be listed in the verdict's assumptions, and the shim must open nothing new."""
import io
import json
import os
import textwrap

import pytest

pytest.importorskip("tensorflow", reason="the verifier tests need tensorflow-cpu (pip install '.[verify]')")

from verified import verdicts  # noqa: E402

from cliplint.analysis import lint_module  # noqa: E402
from cliplint.cache import MAC_CHARS  # noqa: E402
from cliplint.findings import Finding  # noqa: E402
from cliplint.rules import ALL_RULES  # noqa: E402
from cliplint.verify import Session, other_flavour_installed, verify_findings  # noqa: E402
from cliplint.verify.allowlist import SHIMS, SYMBOLS, migrated  # noqa: E402
from cliplint.verify.payload import prepare  # noqa: E402
from cliplint.verify.progress import Progress  # noqa: E402

RULES = list(ALL_RULES.values())

LEGACY = textwrap.dedent("""\
    import tensorflow as tf
    from keras import backend as K
    from keras.optimizers import RMSprop


    class ActorCritic:
        def build(self, s):
            self.acts_prob = tf.nn.softmax(tf.matmul(s, self.w))
            self.exp_v = tf.log(self.acts_prob[0, self.a]) * self.td_error


    def keras2_loss(y_true, logits):
        probs = K.softmax(logits)
        return -K.sum(y_true * K.log(probs))


    opt = RMSprop(lr=0.01, clipnorm=1.0, clipvalue=1.0)
    clipped = tf.clip_by_value(tf.placeholder(tf.float32, [None, 3]), 1.0, -1.0)
    mine = tf.clip_by_value(tf.constant([1.0, 5.0]), 1.0, -1.0)
    settings = dict(clipnorm=1.0, clipvalue=0.5)
    opt_kw = tf.keras.optimizers.Adam(1e-3, **settings)
""")


@pytest.fixture(scope="module")
def legacy():
    return verdicts("legacy.py", LEGACY)


def test_every_legacy_finding_is_confirmed(legacy):
    assert set(legacy) == {("CL004", 9), ("CL004", 14), ("CL001", 17), ("CL009", 18), ("CL009", 19),
                           ("CL001", 21)}
    assert all(v["verdict"] == "confirmed" for v in legacy.values()), legacy


def test_compat_v1_name_runs_and_is_listed(legacy):
    v = legacy[("CL004", 9)]
    assert "ran `tf.log` as `tf.compat.v1.log` (tensorflow.log is not in TF 2)" in v["assumptions"]
    assert "your expression gives [-inf] and its gradient is NaN" in v["evidence"]


def test_self_attributes_get_stand_ins_of_their_role(legacy):
    assumptions = legacy[("CL004", 9)]["assumptions"]
    assert "`self.acts_prob` is the softmax output" in assumptions
    assert "`self.a` picks the class the stand-in logits make least likely (2)" in assumptions


def test_legacy_keras_backend_function_runs_and_is_listed(legacy):
    v = legacy[("CL004", 14)]
    assert any(a.startswith("ran `K.log` as the legacy Keras backend's `log`") for a in v["assumptions"]), v
    assert "-inf" in v["evidence"]


def test_renamed_optimizer_argument_is_listed_and_both_flavours_reported(legacy):
    v = legacy[("CL001", 17)]
    assert "ran the Keras 2 argument `lr=` as `learning_rate=`" in v["assumptions"]
    assert "Only one of `clipnorm`, `clipvalue`" in v["evidence"] or "silently had no effect" in v["evidence"]
    if other_flavour_installed():
        assert "under the other Keras flavour: confirmed" in v["evidence"]
        assert "Keras 3" in v["evidence"] and "tf-keras" in v["evidence"]


def test_placeholder_is_a_concrete_stand_in_and_evidence_says_so(legacy):
    v = legacy[("CL009", 18)]
    assert any(a.startswith("ran `tf.placeholder` as a concrete tensor of 0.5s") for a in v["assumptions"])
    assert "the placeholder's stand-in [0.5, 0.5, 0.5, 0.5, 0.5, 0.5] became [1, 1, 1, 1, 1, 1]" in v["evidence"]


def test_evidence_shows_the_users_own_tensor(legacy):
    v = legacy[("CL009", 19)]
    assert "your tensor [1, 5] became [1, 1]" in v["evidence"]
    assert not any("stood in" in a for a in v["assumptions"])


def test_a_mapping_spread_with_double_star_keeps_its_kind(legacy):
    v = legacy[("CL001", 21)]
    assert "clipnorm=1.0, clipvalue=0.5" in v["evidence"] or "clipnorm=1, clipvalue=0.5" in v["evidence"]


def _probe_finding(probe: dict) -> Finding:
    return Finding(path="x.py", line=1, column=1, end_line=1, end_column=2, code="CL004", name="log-of-softmax",
                   severity="error", message="log of softmax", probe=probe)


def test_tf_layers_dense_runs_as_a_keras_dense_with_its_activation():
    """The producer `tf.layers.dense(..., activation=tf.nn.softmax)` (TF 1): its activation is applied
    to the stand-in logits, and the substitution is listed."""
    imports = {"tf": "tensorflow"}
    probe = {"kind": "softmax", "padded": False,
             "log": {"code": "tf.log(self.acts_prob)", "imports": imports, "constants": {}},
             "source": {"code": "tf.layers.dense(l1, 3, activation=tf.nn.softmax)", "imports": imports,
                        "constants": {}}}
    v = verify_findings([_probe_finding(probe)], timeout=120)[0].verification
    assert v["verdict"] == "confirmed", v
    assert "ran `tf.layers.dense` as a Keras Dense layer with the same units and activation" in v["assumptions"]
    assert "the output of `tf.layers.dense` before its activation is the stand-in logits" in v["assumptions"]


def test_padding_that_is_not_replayed_is_said():
    imports = {"tf": "tensorflow"}
    probe = {"kind": "softmax", "padded": True,
             "log": {"code": "tf.log(self.probs)", "imports": imports, "constants": {}},
             "source": {"code": "tf.nn.softmax(self.logits)", "imports": imports, "constants": {}}}
    v = verify_findings([_probe_finding(probe)], timeout=120)[0].verification
    assert "(without your padding, not replayed)" in v["evidence"]
    assert any("that step is not replayed" in a for a in v["assumptions"])


@pytest.mark.parametrize("code,symbol", [
    ("tf.compat.v1.gfile.GFile('x').read()", "tf.compat.v1.gfile.GFile"),
    ("tf.compat.v1.py_func(tf.nn.softmax, [x], tf.float32)", "tf.compat.v1.py_func"),
    ("tf_keras.utils.get_file('x', 'y')", "tf_keras.utils.get_file"),
    ("K.eval(tf.io.read_file('x'))", "K.eval"),
    ("tf.gfile.GFile('x')", "tf.gfile.GFile"),
    ("tf.layers.dense(x, 3, activation=tf.compat.v1.py_func)", "tf.compat.v1.py_func"),
    ("tf.placeholder(tf.float32, tf.io.read_file('x'))", "tf.io.read_file"),
    ("tf.train.Saver()", "tf.train.Saver"),
    ("tf.Session().run(x)", "tf.Session"),
])
def test_the_shim_opens_nothing_refused_before(code, symbol):
    """Hostile snippets through compat.v1, tf-keras and the shims stay refused by layer 1."""
    imports = {"tf": "tensorflow", "K": "keras.backend", "tf_keras": "tf_keras"}
    prepared = prepare({"rule": "CL004", "kind": "softmax", "log": {"code": code, "imports": imports}})
    assert isinstance(prepared, str) and f"`{symbol}`" in prepared, prepared


def test_hostile_snippet_through_the_cli_is_skipped():
    source = ("import tensorflow as tf\n"
              "x = tf.log(tf.nn.softmax(tf.compat.v1.py_func(tf.nn.relu, [1.0], tf.float32)))\n")
    findings, _ = lint_module("h.py", source, RULES)
    verification = verify_findings(findings, timeout=120)[0].verification
    assert verification["verdict"] == "skipped" and "tf.compat.v1.py_func" in verification["evidence"]


def test_every_shim_target_is_allowlisted_and_exists():
    import tensorflow as tf

    for legacy_name in ("tensorflow.log", "tensorflow.train.AdamOptimizer", "tensorflow.div", "tensorflow.to_float"):
        target = migrated(legacy_name)
        assert target in SYMBOLS and target.startswith("tensorflow.compat.v1.")
    for target in SHIMS.values():
        assert target in SYMBOLS
    for name in (s for s in SYMBOLS if s.startswith("tensorflow.compat.v1.")):
        obj = tf.compat.v1
        for part in name.split(".")[3:]:
            obj = getattr(obj, part)
    assert migrated("tensorflow.gfile.GFile") is None and migrated("tensorflow.py_func") is None


def test_a_cached_verdict_does_not_start_tensorflow(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    findings, _ = lint_module("legacy.py", LEGACY, RULES)
    cl009 = [f for f in findings if f.code == "CL009"]
    first = Session(timeout=120, cache_folder=str(tmp_path / "cache"))
    try:
        verdicts = [first.verify(f) for f in cl009]
    finally:
        first.close()
    second = Session(timeout=120, cache_folder=str(tmp_path / "cache"))
    try:
        again = [second.verify(f) for f in cl009]
        assert second.worker is None and second.cache_hits == len(cl009)
    finally:
        second.close()
    assert again == verdicts


def test_a_planted_cache_entry_is_not_trusted(tmp_path, monkeypatch):
    """The cache folder sits in the (possibly hostile) checkout: an entry whose MAC does not match
    the per-user key is a miss, and the probe runs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    findings, _ = lint_module("legacy.py", LEGACY, RULES)
    finding = next(f for f in findings if f.code == "CL009")
    session = Session(timeout=120, cache_folder=str(tmp_path / "cache"))
    try:
        session.verify(finding)
    finally:
        session.close()
    entry = next((tmp_path / "cache" / "verdicts").rglob("*.json"))
    text = entry.read_text()
    mac, body = text[:MAC_CHARS], text[MAC_CHARS:]  # the entry is its MAC, then the verdict
    forged = json.loads(body)
    forged.update(verdict="not-reproduced", evidence="FORGED")
    entry.write_text(mac + json.dumps(forged, sort_keys=True))
    session = Session(timeout=120, cache_folder=str(tmp_path / "cache"))
    try:
        verdict = session.verify(finding)
        assert session.cache_hits == 0 and session.worker is not None
    finally:
        session.close()
    assert verdict["verdict"] == "confirmed" and "FORGED" not in verdict["evidence"]


def test_progress_counts_findings_and_time():
    stream = io.StringIO()
    progress = Progress(3, stream)
    progress.update(0)
    progress.update(3)
    progress.clear()
    text = stream.getvalue()
    assert "0/3 findings verified, 0 s" in text and "3/3 findings verified" in text
    assert text.endswith("\r")


def test_cli_is_quiet_without_a_terminal_and_second_run_uses_the_cache(tmp_path, run_cli):
    (tmp_path / "legacy.py").write_text(LEGACY)
    env = {"XDG_CACHE_HOME": str(tmp_path / "home-cache")}
    first = run_cli("check", "legacy.py", "--isolated", "--verify", "--output-format", "json", env=env)
    assert "findings verified" not in first.stderr
    second = run_cli("check", "legacy.py", "--isolated", "--verify", "--output-format", "json", env=env)
    assert json.loads(second.stdout) == json.loads(first.stdout)
    entries = list((tmp_path / ".cliplint_cache" / "verdicts").rglob("*.json"))
    assert len(entries) >= 5
    assert os.stat(tmp_path / "home-cache" / "cliplint" / "verdict-key").st_mode & 0o077 == 0
