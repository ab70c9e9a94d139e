"""What a module's analysis follows into the project's other modules, through the installed
command: a file holding no rule's token of its own (only the log, or only the call), whose
probability is made in a module it imports or in the module importing it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

NETWORK = '''import tensorflow as tf


class FullyConv:
    def __init__(self, data_format="NCHW"):
        self.data_format = data_format

    def head(self, x):
        return tf.nn.softmax(x)

    def build(self, x):
        policy = (self.head(x), {})
        return policy, x


def make(x):
    return tf.nn.softmax(x)
'''

UTIL = '''import tensorflow as tf


def safe_log(x):
    return tf.math.log(tf.maximum(1e-12, x))
'''

AGENT = '''from rl.net import FullyConv
from rl.util import safe_log


class Agent:
    def __init__(self, sess, network_cls=FullyConv):
        self.network_cls = network_cls

    def build(self, x):
        policy, value = self.network_cls(data_format="NHWC").build(x)
        return entropy(policy)


def entropy(policy):
    fn_pi, args = policy
    return safe_log(fn_pi)
'''

LOGS_IMPORTED = '''import tensorflow as tf
from rl.net import make


def loss(x):
    return -tf.math.log(make(x))
'''


def write(root: Path, files: dict) -> Path:
    (root / "setup.py").write_text("")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "rl" / "__init__.py").write_text("")
    return root


def found(run_cli, root: Path, *paths: str) -> set:
    result = run_cli("--output-format", "json", "--no-cache", *paths, cwd=root)
    assert result.returncode in (0, 1), result.stderr
    return {(r["path"], r["line"], r["code"]) for r in json.loads(result.stdout)}


def test_a_file_without_a_token_logs_what_an_imported_helper_returns(tmp_path, run_cli):
    root = write(tmp_path, {"rl/net.py": NETWORK, "rl/loss.py": LOGS_IMPORTED})
    assert found(run_cli, root, "rl/loss.py") == {("rl/loss.py", 6, "CL004")}


def test_a_helper_is_given_a_softmax_by_its_importers_callers(tmp_path, run_cli):
    # the log is util.py's helper; the softmax comes from an agent's class default, through the
    # method that unpacks the policy its network's `build` returns. The helper is a log under
    # another name: the finding is at its call, where the softmax meets it, not inside it
    root = write(tmp_path, {"rl/net.py": NETWORK, "rl/util.py": UTIL, "rl/agent.py": AGENT})
    assert found(run_cli, root, ".") == {("rl/agent.py", 16, "CL004")}


@pytest.mark.parametrize("twin", [("tf.nn.softmax(x)", "x")])
def test_the_clean_twins_have_no_finding(tmp_path, run_cli, twin):
    network = NETWORK.replace(*twin)
    root = write(tmp_path, {"rl/net.py": network, "rl/util.py": UTIL, "rl/agent.py": AGENT,
                            "rl/loss.py": LOGS_IMPORTED})
    assert found(run_cli, root, ".") == set()
