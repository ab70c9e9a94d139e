"""Red team: hostile snippets inside ordinary findings, run by the real `cliplint --verify` with real
TensorFlow, twice: as shipped (both layers), and with layer 1 switched off by the test-only hook
(`CLIPLINT_TEST_ONLY_SKIP_LAYER1=1`, honoured only while pytest runs a test), so that layer 2 alone
faces snippets that run as written with every builtin.

Every attack sits in its own file as an argument of an ordinary finding: `Adam(learning_rate=<attack>,
clipnorm=1.0, clipvalue=0.5)` (CL001; the rule needs literal clip options) or
`log(softmax(logits, axis=<attack>))` (CL004). Each run is one
command over all attack files (one worker session, replaced when an attack kills it); each attack
is then checked for: no marker file, no connection to a local listener, no secret (environment
or file, content or name) in the output, no forged verdict, no process or temporary folder left,
and the run's bounded time.
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

tf = pytest.importorskip("tensorflow", reason="the red-team tests need tensorflow-cpu (pip install '.[verify]')")

from cliplint.verify.allowlist import STRINGS  # noqa: E402

SECRET = "ENV-SECRET-7f3a9c"
FILE_SECRET = "FILE-SECRET-51be0d"
FORGED = "FORGED-VERDICT"
TOKEN = "redteam-4242"  # in the command line of every process an attack starts
RUN_LIMIT = 420.0  # seconds for one whole command over all attacks
HEADER = "import tensorflow as tf\nimport numpy as np\n"

# (name, class, extra imports, expression). {m} is the attack's marker path, {s} the secret file,
# {d} its folder, {p} the listener's port, {f} an expression that builds the forged verdict text.
ATTACKS = [
    # 1. modules reachable through public attribute chains
    ("ma_core_builtins_exec", 1, "", "np.ma.core.builtins.exec(\"open({m!r}, 'w').write('x')\")"),
    ("mock_sys_modules", 1, "", "tf.compat.v1.test.mock.sys.modules['os'].system('touch {m}')"),
    ("ma_builtins_import", 1, "", "np.ma.core.builtins.__import__('os').system('touch {m}')"),
    ("from_ma_core_import_builtins", 1, "from numpy.ma.core import builtins", "builtins.open({m!r}, 'w').write('x')"),
    ("operator_attrgetter_globals", 1, "import operator",
     "operator.attrgetter('__globals__')(np.ma.core.builtins.open)"),
    ("inspect_frame_globals", 1, "import inspect",
     "inspect.currentframe().f_globals['__builtins__']['open']({m!r}, 'w').write('x')"),
    ("subclasses_walk", 1, "",
     "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0]"
     ".__init__.__globals__['system']('touch {m}')"),
    ("ctypes_libc_system", 1, "", "np.ctypeslib.ctypes.CDLL(None).system(b'touch {m}')"),
    ("array_ctypes_attribute", 1, "", "np.zeros(1).ctypes._ctypes.CDLL(None).system(b'touch {m}')"),
    ("pywrap_tensorflow", 1, "from tensorflow.python import pywrap_tensorflow",
     "pywrap_tensorflow.__builtins__['open']({m!r}, 'w').write('x')"),
    ("fullwidth_exec", 1, "", "ｅｘｅｃ(\"open({m!r}, 'w').write('x')\")"),
    # 2. TF / Keras / NumPy APIs with side effects
    ("raw_ops_write_file", 2, "", "tf.raw_ops.WriteFile(filename={m!r}, contents='x')"),
    ("raw_ops_read_file", 2, "", "tf.raw_ops.ReadFile(filename={s!r})"),
    ("raw_ops_matching_files", 2, "", "tf.raw_ops.MatchingFiles(pattern={d!r} + '/*')"),
    ("io_write_file_alias", 2, "from tensorflow.io import gfile as g", "g.GFile({m!r}, 'w').write('x')"),
    ("print_output_stream", 2, "", "tf.print('x', output_stream='file://' + {m!r})"),
    ("write_graph", 2, "", "tf.compat.v1.train.write_graph(tf.compat.v1.GraphDef(), {d!r}, 'pwned-graph')"),
    ("debug_identity_urls", 2, "",
     "tf.raw_ops.DebugIdentityV2(input=tf.constant(1.0), debug_urls=['file://' + {d!r} + '/pwned-debug'])"),
    ("local_server", 2, "", "tf.compat.v1.train.Server.create_local_server()"),
    ("keras_get_file", 2, "", "tf.keras.utils.get_file('x', 'http://127.0.0.1:{p}/x', cache_dir={d!r})"),
    ("keras_save", 2, "", "tf.keras.Sequential([tf.keras.Input((1,))]).save({m!r} + '.keras')"),
    ("keras_lambda_layer", 2, "",
     "tf.keras.layers.Lambda(lambda x: np.ma.core.builtins.open({m!r}, 'w'))(tf.constant([1.0]))"),
    ("py_function_in_tf_function", 2, "",
     "tf.function(lambda: tf.py_function(lambda: open({m!r}, 'w').write('x') or 1.0, [], tf.float32))()"),
    ("numpy_fromregex", 2, "", "np.fromregex({s!r}, '(.*)', [('a', 'S64')])"),
    ("numpy_rec_fromfile", 2, "", "np.rec.fromfile({s!r}, formats='S64')"),
    ("text_file_initializer", 2, "", "tf.lookup.TextFileInitializer({s!r}, tf.string, 0, tf.int64, -1)"),
    ("np_load_pickle", 2, "", "np.load({d!r} + '/evil.npy', allow_pickle=True)"),
    ("pickle_reduce", 2, "",
     "np.ma.core.builtins.__import__('pickle').loads(b\"cos\\nsystem\\n(S'touch {m}'\\ntR.\")"),
    ("tf_strings_format", 2, "", "tf.strings.format('{{}}', tf.raw_ops.ReadFile(filename={s!r}))"),
    # 3. string formatting that walks dunders
    ("format_globals_environ", 3, "",
     "'{{0.__globals__[os].environ[CLIPLINT_REDTEAM_SECRET]}}'.format(np.ma.core.builtins.__import__('os').path.join)"),
    ("percent_format_file", 3, "", "'%s' % np.ma.core.builtins.open({s!r}).read()"),
    ("fstring_dunder", 3, "", "f'{{np.ma.core.__dict__}}'"),
    # 4. leaks into the report (a Keras ValueError that quotes its argument)
    ("leak_file_into_error", 4, "", "np.ma.core.builtins.open({s!r}).read()"),
    ("leak_env_into_error", 4, "", "np.ma.core.builtins.__import__('os').environ.get('CLIPLINT_REDTEAM_SECRET')"),
    ("leak_parent_environ", 4, "",
     "np.ma.core.builtins.open('/proc/%d/environ' % np.ma.core.builtins.__import__('os').getppid()).read()"),
    ("leak_parent_cwd_file", 4, "",
     "np.ma.core.builtins.open('/proc/%d/cwd/secret.txt' % np.ma.core.builtins.__import__('os').getppid()).read()"),
    # 5. verdict forgery through the channel
    ("forge_via_proc_fd", 5, "",
     "[np.ma.core.builtins.open('/proc/self/fd/%d' % n, 'w').write({f}) for n in range(3, 12)]"),
    ("forge_via_os_write", 5, "",
     "[np.ma.core.builtins.__import__('os').write(n, {f}.encode()) for n in (1, 2, 3, 4, 5, 6)]"),
    # 6. process and time hygiene, and new ideas
    ("detached_process", 6, "",
     "np.ma.core.builtins.__import__('subprocess').Popen([np.ma.core.builtins.__import__('sys').executable, "
     "'-c', 'import time; time.sleep(60)', '{t}'], start_new_session=True)"),
    ("fork", 6, "", "np.ma.core.builtins.__import__('os').fork()"),
    ("kill_parent", 6, "",
     "np.ma.core.builtins.__import__('os').kill(np.ma.core.builtins.__import__('os').getppid(), 9)"),
    ("kill_process_group", 6, "", "np.ma.core.builtins.__import__('os').killpg(0, 9)"),
    ("socket_connect", 6, "", "np.ma.core.builtins.__import__('socket').create_connection(('127.0.0.1', {p}))"),
    ("pth_in_site_packages", 6, "",
     "np.ma.core.builtins.open(np.ma.core.builtins.__import__('site').getsitepackages()[0] + "
     "'/cliplint_redteam.pth', 'w').write('import os; os.system(\"touch {m}\")')"),
    ("generator_frame", 6, "", "(x for x in [1]).gi_frame.f_builtins['open']({m!r}, 'w')"),
    ("gc_objects", 6, "", "np.ma.core.builtins.__import__('gc').get_objects()[0]"),
    ("tiocsti", 6, "",
     "np.ma.core.builtins.__import__('fcntl').ioctl(2, 0x5412, b'x')"),
    ("np_lib_npyio", 6, "", "np.lib.npyio.DataSource({d!r}).open('http://127.0.0.1:{p}/x')"),
    ("tf_experimental_numpy", 6, "", "tf.experimental.numpy.asarray(np.ma.core.builtins.open({s!r}).read())"),
    ("prlimit_parent", 6, "",
     "np.ma.core.builtins.__import__('resource').prlimit(np.ma.core.builtins.__import__('os').getppid(), "
     "np.ma.core.builtins.__import__('resource').RLIMIT_NOFILE, (3, 3))"),
    ("ptrace_parent", 6, "",
     "np.ctypeslib.ctypes.CDLL(None).ptrace(16, np.ma.core.builtins.__import__('os').getppid(), 0, 0)"),
    # 9. through what layer 1 admits so that real projects verify: the compat.v2 fold, the derived
    # pure functions, compared strings, string-keyed subscripts (numbered with the class they belong to)
    ("compat_v2_fold_to_gfile", 2, "", "tf.compat.v2.io.gfile.GFile({m!r}, 'w').write('x')"),
    ("compat_v2_compat_v1_write_file", 2, "", "tf.compat.v2.compat.v1.write_file({m!r}, 'x')"),
    ("derived_function_globals", 1, "", "tf.math.reduce_sum.__globals__['__builtins__']['open']({m!r}, 'w')"),
    ("derived_identity_n_read_file", 2, "", "tf.identity_n([tf.io.read_file({s!r})])[0]"),
    ("derived_reshape_raw_ops", 2, "", "tf.reshape(tf.raw_ops.ReadFile(filename={s!r}), [-1])"),
    ("compared_string_escapes", 3, "", "tf.convert_to_tensor([{s!r} == 'x', {s!r}][1])"),
    ("subscript_of_imported_environ", 4, "from os import environ", "environ['CLIPLINT_REDTEAM_SECRET']"),
]
# Code that rewrites the probe in the worker's own memory decides that probe's verdict: only
# layer 1 stops it (layer 2 guards the machine, not the verdicts of a run it is part of).
IN_PROCESS_FORGERY = [
    ("forge_by_patching_probe", 5, "",
     "np.ma.core.builtins.__import__('sys').modules['cliplint.verify.probes.optimizers'].__setattr__('verdict', "
     "lambda *a, **k: {{'verdict': 'confirmed', 'evidence': {f}, 'assumptions': []}})"),
]


# Text built at run time from what layer 1 admits: slices of allowlisted string literals, `str()` of
# numbers, booleans and allowlisted classes (the flavour the worker runs: the test's own).
_SOURCES = ["str(True)", "str(False)", "str(None)", "str(0.5)", "str(tf.keras.layers.Dense)", "str(tf.Variable)",
            "str(tf.keras.optimizers.SGD)", "str(tf.keras.losses.MeanSquaredError)", "str(tf.keras.optimizers.Lion)",
            "str(tf.keras.losses.CategoricalCrossentropy)"]


def spell(text: str) -> str:
    """An expression layer 1's rebuild accepts that evaluates to `text`, one character at a time."""
    pieces = []
    for char in text:
        literal = next((w for w in sorted(STRINGS) if char in w), None)
        if literal is not None:
            pieces.append(f"{literal!r}[{literal.index(char)}]")
            continue
        source = next(e for e in _SOURCES if char in eval(e, {"tf": tf}))
        pieces.append(f"{source}[{eval(source, {'tf': tf}).index(char)}]")
    return "(" + " + ".join(pieces) + ")"


def config(class_name: str, inner, module: str) -> str:
    """A Keras configuration dict, every string spelled at run time."""
    return (f"dict(zip([{spell('class_name')}, {spell('config')}, {spell('module')}], "
            f"[{spell(class_name)}, {inner}, {spell(module)}]))")


def _inner(**fields: str) -> str:
    return "{" + ", ".join(f"{spell(k)}: {spell(v)}" for k, v in fields.items()) + "}"


MODULE = "keras.layers"
VOCABULARY = "{" + ", ".join(f"{spell(k)}: {spell(v)}" for k, v in (
    ("vocabulary", "secret.txt"), ("standardize", "lower"), ("split", "whitespace"))) + f", {spell('ngrams')}: None}}"
# 7. Values built at run time that reach an allowlisted Keras constructor which deserialises
# strings and dicts: every name is allowlisted, every literal is a known argument value. Each is
# refused by the worker's check of argument values (`probes/guard.py`), naming the callable.
VALUE_ATTACKS = [
    ("config_sets_global_epsilon", 7, "",
     f"tf.keras.layers.Dense(1, activation={config('function', spell('set_epsilon'), 'keras.config')})"
     "(tf.ones([1, 1]))"),
    ("config_sets_floatx_through_initializer", 7, "",
     f"tf.keras.layers.Dense(1, kernel_initializer={config('function', spell('set_floatx'), 'keras.config')})"),
    ("config_reads_vocabulary_file", 7, "",
     f"tf.keras.layers.Activation({config('TextVectorization', VOCABULARY, MODULE)})"),
    ("config_loads_savedmodel", 7, "",
     f"tf.keras.layers.Activation({config('TFSMLayer', _inner(filepath='model', call_endpoint='serve'), MODULE)})"),
    ("dict_literal_initializer", 7, "",
     f"tf.keras.layers.Dense(1, kernel_initializer={{{spell('class_name')}: {spell('Constant')}, "
     f"{spell('config')}: {{}}}})"),
    ("str_of_allowlisted_class_as_dtype", 7, "", "tf.keras.layers.Dense(1, dtype=str(tf.keras.layers.Dense))"),
    ("sliced_mixed_precision_policy", 7, "", f"tf.keras.layers.Dense(1, dtype={spell('mixed_float16')})"),
    ("sorted_join_initializer_name", 7, "",
     f"tf.keras.layers.Dense(1, kernel_initializer=sorted([{spell('onal')}, {spell('orthog')}])[1]"
     f" + sorted([{spell('onal')}, {spell('orthog')}])[0])"),
    ("reversed_string_activation", 7, "",
     f"tf.keras.layers.Dense(1, activation=list(reversed([{spell('moid')}, {spell('hard_sig')}]))[0]"
     f" + list(reversed([{spell('moid')}, {spell('hard_sig')}]))[1])"),
    ("config_in_sequential_list", 7, "",
     f"tf.keras.Sequential([{config('Dense', _inner(units='ones'), MODULE)}])"),
    ("safe_mode_keyword", 7, "", f"tf.keras.layers.Dense(1, **{{{spell('safe_mode')}: False}})"),
    ("shim_dense_config_activation", 7, "",
     f"tf.layers.dense(tf.ones([1, 2]), 3, activation={config('function', spell('set_epsilon'), 'keras.config')})"),
    ("loss_built_reduction", 7, "", f"tf.keras.losses.MeanSquaredError(reduction={spell('sum_over_batch_sizes')})"),
    ("string_tensor_as_activation", 7, "", "tf.keras.layers.Dense(1, activation=tf.constant('softmax'))"),
    # through what layer 1 admits for real projects: a derived pure function, `.name`, IndexedSlices
    ("derived_reshape_built_string", 7, "", f"tf.reshape({spell('secret.txt')}, [-1])"),
    ("layer_name_as_tensor", 7, "", "tf.convert_to_tensor(tf.keras.layers.Dense(1).name)"),
    ("indexed_slices_built_string", 7, "", f"tf.IndexedSlices({spell('secret.txt')}, tf.constant([0]))"),
]
# 8. Verdicts forged through an exception's text: the snippet makes the call raise a ValueError
# whose message is its own text (`float('...')` quotes its argument). {v} is that text.
FORGED_TEXT = "forged_by_message"
TEMPLATES = {
    "CL009": "opt = tf.keras.optimizers.Adam(learning_rate={e}, clipnorm=0.0)\n",
    "CL005": ("def step(model, loss, tape):\n    grads = tape.gradient(loss, model.trainable_variables)\n"
              "    grads = [tf.clip_by_value(g, -1.0, {e}) for g in grads]\n    return grads\n"),
}
MESSAGE_FORGERY = [
    ("forge_invalid_threshold_by_message", 8, "", f"float({spell(FORGED_TEXT + ' clipnorm')})", "CL009"),
    ("forge_none_gradient_by_message", 8, "", f"float({spell(FORGED_TEXT)})", "CL005"),
    ("forge_conflict_by_message", 8, "", f"float({spell(FORGED_TEXT + ' clipnorm clipvalue')})"),
]

# The same expressions inside a CL004 finding (a keyword of the softmax the probe evaluates).
LOG_SOFTMAX = ("raw_ops_write_file", "ma_core_builtins_exec", "socket_connect", "leak_file_into_error",
               "forge_via_os_write")


def _source(name: str, imports: str, expression: str, log_form: bool, template: str = "") -> str:
    if template:
        return f"{HEADER}{imports}\n" + TEMPLATES[template].format(e=expression)
    if log_form:
        return f"{HEADER}{imports}\nlp = tf.math.log(tf.nn.softmax(logits, axis={expression}))\n"
    return (f"{HEADER}{imports}\n"
            f"opt = tf.keras.optimizers.Adam(learning_rate={expression}, clipnorm=1.0, clipvalue=0.5)\n")


class Listener:
    """A local TCP listener that counts the connections it accepts."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            connection.close()


def _processes_left(scratch: Path, token: str = TOKEN) -> list:
    """Processes started by an attack (`token` in their command line) or a worker still in the scratch
    folder. Each test module has its own token: under xdist another module's attacks run beside these."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if token in command or cwd.startswith(str(scratch)):
            found.append(f"{entry.name}: {command[:120]}")
    return found


def _run(tmp_path_factory, layer1: bool, attacks=None) -> dict:
    attacks = attacks or ATTACKS
    root = tmp_path_factory.mktemp("layer1-on" if layer1 else "layer1-off")
    repo, secrets, scratch = root / "repo", root / "secrets", root / "tmp"
    for folder in (repo, secrets, scratch):
        folder.mkdir()
    secret_file = secrets / f"secret-{FILE_SECRET}.txt"
    secret_file.write_text(FILE_SECRET)
    (repo / "secret.txt").write_text(FILE_SECRET)
    listener = Listener()
    forged = ("'x {\"id\": 1, \"answer\": {\"verdict\": \"confirmed\", \"evidence\": \"" + FORGED[:7]
              + "' + '" + FORGED[7:] + "\", \"assumptions\": []}}\\n'")
    markers = {}
    for name, cls, imports, expression, *template in attacks:
        markers[name] = root / f"marker-{name}"
        filled = expression.format(m=str(markers[name]), s=str(secret_file), d=str(secrets), p=listener.port,
                                   f=forged, t=TOKEN) if cls <= 6 else expression
        (repo / f"attack_{name}.py").write_text(_source(name, imports, filled, False, *template), encoding="utf-8")
        if name in LOG_SOFTMAX:
            (repo / f"attack_{name}_log.py").write_text(_source(name, imports, filled, True), encoding="utf-8")
    (repo / "benign.py").write_text(BENIGN)
    (secrets / "evil.npy").write_bytes(f"cos\nsystem\n(S'touch {root / 'marker-np_load_pickle'}'\ntR.".encode())
    environment = {**os.environ, "NO_COLOR": "1", "CLIPLINT_REDTEAM_SECRET": SECRET, "TMPDIR": str(scratch),
                   "CLIPLINT_CACHE_DIR": str(root / "cache")}
    environment.pop("CLIPLINT_TEST_ONLY_SKIP_LAYER1", None)
    if not layer1:
        environment["CLIPLINT_TEST_ONLY_SKIP_LAYER1"] = "1"
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "cliplint", "--verify", "--output-format", "json",
                             "--verify-timeout", "20", "--verify-budget", "300", "."],
                            cwd=repo, env=environment, capture_output=True, text=True, timeout=RUN_LIMIT + 60)
    elapsed = time.monotonic() - started
    time.sleep(0.5)  # a process an attack detached would still be there
    listener.server.close()
    records = json.loads(result.stdout) if result.stdout.strip().startswith("[") else []
    return {"result": result, "elapsed": elapsed, "records": records, "markers": markers, "listener": listener,
            "root": root, "scratch": scratch, "processes": _processes_left(scratch),
            "site_pth": [p for p in map(Path, sys.path) if (p / "cliplint_redteam.pth").exists()]}


BENIGN = """\
import tensorflow as tf
opt = tf.keras.optimizers.Adam(learning_rate=1e-3, clipnorm=1.0, clipvalue=0.5)
lp = tf.math.log(tf.nn.softmax(logits) + tf.keras.backend.epsilon())
def step(grads):
    grads = [tf.clip_by_norm(g, 1.0) for g in grads]
    return grads
"""


@pytest.fixture(scope="module")
def layer1_on(tmp_path_factory):
    return _run(tmp_path_factory, layer1=True, attacks=ATTACKS + IN_PROCESS_FORGERY + VALUE_ATTACKS + MESSAGE_FORGERY)


@pytest.fixture(scope="module")
def layer1_off(tmp_path_factory):
    return _run(tmp_path_factory, layer1=False, attacks=ATTACKS + VALUE_ATTACKS + MESSAGE_FORGERY)


def _verdicts(run: dict, name: str) -> list:
    files = {f"attack_{name}.py", f"attack_{name}_log.py"}
    return [r["verification"] for r in run["records"] if Path(r["path"]).name in files]


def _assert_contained(run: dict, name: str) -> None:
    # a finding's fix quotes the attack file's own source (which names the secret file): not a leak
    findings = [{key: value for key, value in record.items() if key != "fix"} for record in run["records"]]
    output = (json.dumps(findings) if run["records"] else run["result"].stdout) + run["result"].stderr
    assert run["result"].returncode in (0, 1), run["result"].stderr[-2000:]
    assert not run["markers"][name].exists(), f"{name} created its marker file"
    assert not list(run["root"].glob("**/pwned*")), f"{name}: a file was written"
    assert run["listener"].accepted == 0, "a connection reached the local listener"
    for secret in (SECRET, FILE_SECRET):
        assert secret not in output, f"{name}: a secret reached the report"
    assert FORGED not in output and FORGED_TEXT not in output, f"{name}: a forged verdict reached the report"
    assert run["processes"] == [], f"processes left: {run['processes']}"
    assert list(run["scratch"].iterdir()) == [], "a temporary folder was left"
    assert run["site_pth"] == [], "a .pth file was planted in site-packages"
    assert run["elapsed"] < RUN_LIMIT
    assert _verdicts(run, name), f"{name}: no finding (the attack must sit in an ordinary finding)"


NAMES = [name for name, *_ in ATTACKS]
VALUE_NAMES = [name for name, *_ in VALUE_ATTACKS]
FORGERY_NAMES = [name for name, *_ in MESSAGE_FORGERY]


def _assert_skipped(run: dict, name: str, evidence: str) -> None:
    _assert_contained(run, name)
    for verification in _verdicts(run, name):
        assert verification["verdict"] == "skipped", verification
        assert verification["evidence"].startswith(evidence), verification


@pytest.mark.parametrize("name", NAMES + [name for name, *_ in IN_PROCESS_FORGERY])
def test_both_layers_skip_the_attack(layer1_on, name):
    _assert_skipped(layer1_on, name, "not executed: it uses ")


@pytest.mark.parametrize("name", VALUE_NAMES)
def test_values_built_at_run_time_are_refused_by_the_worker(layer1_on, name):
    """Layer 1's rebuild admits every name and literal of these; the worker refuses the value
    (naming the callable and the argument) before the Keras constructor sees it."""
    _assert_skipped(layer1_on, name, "not executed: the worker refused `")


@pytest.mark.parametrize("name", FORGERY_NAMES)
def test_error_text_never_decides_or_writes_a_verdict(layer1_on, name):
    """The snippet's own text in an exception neither appears in the report nor makes a finding
    confirmed: a conflict is confirmed only by the probe's own build of the clip options."""
    _assert_contained(layer1_on, name)
    for verification in _verdicts(layer1_on, name):
        if verification["verdict"] == "confirmed":
            assert "(your call's clip options alone) raises ValueError (message quoted from Keras: " \
                in verification["evidence"], verification
        else:
            assert verification["verdict"] == "inconclusive", verification


def test_refused_values_leave_global_configuration_unchanged(layer1_on, layer1_off):
    """The files after the attacks (benign.py sorts after attack_*.py) get the same verdicts with
    layer 1 on and with it off (where the attacks ran and the worker reset Keras' state after each)."""
    def benign(run):
        return [(r["code"], r["line"], r["verification"]["verdict"], r["verification"]["evidence"])
                for r in run["records"] if Path(r["path"]).name == "benign.py"]
    assert benign(layer1_on) == benign(layer1_off)
    assert {verdict for _, _, verdict, _ in benign(layer1_on)} == {"confirmed"}


@pytest.mark.parametrize("name", NAMES + VALUE_NAMES + FORGERY_NAMES)
def test_layer_2_alone_contains_the_attack(layer1_off, name):
    _assert_contained(layer1_off, name)
    for verification in _verdicts(layer1_off, name):  # the snippet really ran as written
        assert not verification["evidence"].startswith("not executed"), verification
        assert "could not be started" not in verification["evidence"], verification  # it ran in a worker


def test_attacks_cover_every_class_and_number_thirty_or_more():
    assert len(ATTACKS) >= 30
    assert {cls for _, cls, *_ in ATTACKS + VALUE_ATTACKS + MESSAGE_FORGERY} == {1, 2, 3, 4, 5, 6, 7, 8}


def test_attacks_do_not_change_the_verdicts_of_ordinary_findings(layer1_on, run_cli, tmp_path):
    """The benign file's verdicts are the same with every attack in the same run as alone."""
    (tmp_path / "benign.py").write_text(BENIGN)
    alone = json.loads(run_cli("--verify", "--output-format", "json", "benign.py").stdout)
    together = [r for r in layer1_on["records"] if Path(r["path"]).name == "benign.py"]
    assert [(r["code"], r["line"], r["verification"]["verdict"], r["verification"]["evidence"]) for r in alone] == \
        [(r["code"], r["line"], r["verification"]["verdict"], r["verification"]["evidence"]) for r in together]
    assert {r["verification"]["verdict"] for r in alone} == {"confirmed"}


def test_layer_2_reports_its_layers_active_here(layer1_on):
    """On Linux every layer of the lock-down is expected: the run warns about none (one missing
    would make it execute no snippet, saying which on stderr, and the benign file unverified)."""
    assert "lock-down" not in layer1_on["result"].stderr, layer1_on["result"].stderr[-2000:]
    benign = [r["verification"]["verdict"] for r in layer1_on["records"] if Path(r["path"]).name == "benign.py"]
    assert benign and set(benign) == {"confirmed"}


def test_layer_2_alone_still_contains_in_process_forgery_to_its_own_run(tmp_path_factory):
    """With layer 1 off, code that patches the probe forges its own verdicts (documented in
    SECURITY.md): layer 2 still keeps the machine, the network and the secrets out of reach."""
    run = _run(tmp_path_factory, layer1=False, attacks=IN_PROCESS_FORGERY)
    output = run["result"].stdout + run["result"].stderr
    assert not run["markers"]["forge_by_patching_probe"].exists() and run["listener"].accepted == 0
    assert SECRET not in output and FILE_SECRET not in output
    assert run["processes"] == [] and list(run["scratch"].iterdir()) == []


# The metadata of a file outside the sandbox must not change (mode, owner, times, xattrs, links):
# the secret file (root's when the suite runs as root, as CI often does), with layer 1 off so that
# each call reaches the kernel.
METADATA = [
    ("chmod_setuid", 6, "import os", "os.chmod({s!r}, 0o4777)"),
    ("fchmodat2_raw", 6, "import ctypes", "ctypes.CDLL(None).syscall(452, -100, {s!r}.encode(), 0o4777, 0) or 1e-3"),
    ("utime_epoch", 6, "import os", "os.utime({s!r}, (0, 0))"),
    ("utimensat_raw", 6, "import ctypes", "ctypes.CDLL(None).utimensat(-100, {s!r}.encode(), None, 0) or 1e-3"),
    ("chown_nobody", 6, "import os", "os.chown({s!r}, 65534, 65534)"),
    ("setxattr_user", 6, "import os", "os.setxattr({s!r}, 'user.pwned', b'x')"),
    ("truncate_secret", 6, "import os", "os.truncate({s!r}, 0)"),
    ("hard_link", 6, "import os", "os.link({s!r}, {d!r} + '/pwned-link')"),
    ("symlink_next_to_it", 6, "import os", "os.symlink({s!r}, {d!r} + '/pwned-symlink')"),
    ("mknod_fifo", 6, "import os\nimport stat", "os.mknod({d!r} + '/pwned-fifo', 0o666 | stat.S_IFIFO)"),
    ("rename_away", 6, "import os", "os.rename({s!r}, {d!r} + '/pwned-renamed')"),
]


def test_layer_2_alone_keeps_the_metadata_of_a_file_outside(tmp_path_factory):
    run = _run(tmp_path_factory, layer1=False, attacks=METADATA)
    for name, *_ in METADATA:
        _assert_contained(run, name)
        for verification in _verdicts(run, name):  # the snippet really ran as written, in a worker
            assert not verification["evidence"].startswith("not executed"), verification
            assert "could not be started" not in verification["evidence"], verification
    secret = run["root"] / "secrets" / f"secret-{FILE_SECRET}.txt"
    info = secret.stat()
    umask = os.umask(0)
    os.umask(umask)
    assert info.st_mode & 0o7777 == 0o666 & ~umask and (info.st_uid, info.st_gid) == (os.getuid(), os.getgid())
    assert info.st_ctime_ns == info.st_mtime_ns  # no change of mode, owner, times, links or attributes since written
    assert info.st_nlink == 1 and os.listxattr(secret) == [] and secret.read_text() == FILE_SECRET
