"""libcst's native parser dies (a signal) on deep enough input; cliplint never does.

Inputs a stranger's pull request can ship, through the `cliplint` command: each either parses
or gets one CL000 with its line, and the other files are still linted. A sample of
bench/fuzz_parser.py's matrix runs here; `python bench/fuzz_parser.py` runs all of it.
"""
import importlib.util
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsp_client import CONFIG, editor_capabilities, initialize_params, published, text_item
from lsprotocol import types
from pytest_lsp import LanguageClient

from cliplint.limits import MAX_DEPTH, assess, lexical_nesting
from cliplint.trees import cpython_tree, nesting

ROOT = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("fuzz_parser", ROOT / "bench" / "fuzz_parser.py")
fuzz_parser = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fuzz_parser)

CONFLICT = "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n"
HEADER = "import tensorflow as tf\n" + CONFLICT


def run_cliplint(folder, *args, stack=None):
    """`cliplint --output-format json` in `folder`: its records, after checking that it was not
    killed by a signal and printed no traceback. `stack`: a stack limit in bytes (a process
    whose parser dies anyway)."""
    limit = (lambda: resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))) if stack else None
    done = subprocess.run([sys.executable, "-m", "cliplint", "--no-cache", "--isolated", "--output-format", "json",
                           *args], cwd=folder, capture_output=True, text=True, timeout=600, preexec_fn=limit)
    assert done.returncode in (0, 1), (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def by_file(records):
    found = {}
    for record in records:
        found.setdefault(record["path"], []).append((record["code"], record["line"], record["message"]))
    return found


ATTACKS = {  # inputs built to exhaust the parser, and the stage that must refuse each
    "not.py": ("x = " + "not " * 20_000 + "a\n", 3),
    "lambda.py": ("x = " + "lambda: " * 20_000 + "1\n", 3),
    "minus_continued.py": ("x = " + "- \\\n" * 20_000 + "1\n", 20_002),  # the deepest token
    "plus_lines.py": ("x = 1 \\\n" + "+ 1 \\\n" * 8_000 + "\n", 8_003),
    "commas.py": ("x = [" + "," * 9_800_000 + "]\n", 3),
    "elifs.py": ("if a:\n    pass\n" + "elif a:\n    pass\n" * 16_000, 32_003),
    "attributes.py": ("x = a" + ".b" * 50_000 + "\n", 3),
}


def test_the_red_teams_inputs_get_one_cl000_each_and_the_rest_is_linted(tmp_path):
    for name, (body, _) in ATTACKS.items():
        (tmp_path / name).write_text(HEADER + body)
    (tmp_path / "sibling.py").write_text(HEADER)
    found = by_file(run_cliplint(tmp_path, "."))
    assert [code for code, _, _ in found.pop("sibling.py")] == ["CL001"]
    for name, (_, line) in ATTACKS.items():
        [(code, at, message)] = found[name]
        assert code == "CL000" and at == line, (name, found[name])
        assert "not parsed" in message or f"limit {MAX_DEPTH:,}" in message, message


def test_a_gated_file_says_how_deep_where_and_the_limit(tmp_path):
    (tmp_path / "deep.py").write_text(HEADER + "y = 1\nx = " + "-" * 5_000 + "1\n")
    [record] = run_cliplint(tmp_path, "deep.py")
    assert (record["code"], record["line"]) == ("CL000", 4)
    assert record["message"] == f"nested too deeply to parse: 5,001 levels at line 4, limit {MAX_DEPTH:,}"


SUM = " + ".join(f"a{i}" for i in range(600))


SUMMED = {  # a CL004 finding inside, beside or around a 600-term sum (libcst nests it 600 deep)
    "inside.py": f"tf.math.log(tf.nn.softmax({SUM}))",
    "call_argument.py": f"tf.math.log(tf.nn.softmax(f({SUM})))",
    "keyword_argument.py": f"tf.math.log(tf.nn.softmax(logits=g(a, {SUM})))",
    "operand.py": f"{SUM} + tf.math.log(tf.nn.softmax(logits))",
}


def test_a_600_term_sum_is_linted_not_an_internal_error(tmp_path):
    for name, expression in SUMMED.items():
        (tmp_path / name).write_text(f"import tensorflow as tf\n\ndef loss(logits, a):\n    return {expression}\n")
    found = by_file(run_cliplint(tmp_path, *SUMMED))
    assert {name: [(code, line) for code, line, _ in found.get(name, [])] for name in SUMMED} \
        == {name: [("CL004", 4)] for name in SUMMED}


def test_a_worker_the_parser_kills_costs_only_its_file(tmp_path):
    """A stack too small for the parser (256 KB) makes it die on input the gate lets through:
    with a pool, the dead worker's file gets CL000 and every other file is reported."""
    for index in range(40):
        (tmp_path / f"ok{index}.py").write_text(HEADER)
    (tmp_path / "deep.py").write_text(HEADER + "x = " + "lambda: " * 200 + "1\n")
    found = by_file(run_cliplint(tmp_path, "-j", "2", ".", stack=256 * 1024))
    assert found.pop("deep.py") == [("CL000", 1, "could not be analysed: the parser crashed (signal 11)")]
    assert {name: [code for code, _, _ in found[name]] for name in found} == {f"ok{i}.py": ["CL001"] for i in range(40)}


def test_a_risky_file_is_parsed_in_a_child_process_in_a_single_process_run(tmp_path):
    """Nearer the limit than any code a person writes (here with a 1 MB stack, so that the
    parser dies): parsed in a child, whose death is a CL000; the run goes on."""
    (tmp_path / "deep.py").write_text(HEADER + "x = " + "lambda: " * 900 + "1\n")
    (tmp_path / "sibling.py").write_text(HEADER)
    found = by_file(run_cliplint(tmp_path, "-j", "1", "deep.py", "sibling.py", stack=1024 * 1024))
    assert found["deep.py"] == [("CL000", 1, "could not be analysed: the parser crashed (signal 11)")]
    assert [code for code, _, _ in found["sibling.py"]] == ["CL001"]


SAMPLE = fuzz_parser.matrix((10, 1_500, 12_000))


def test_a_sample_of_the_fuzz_matrix_never_kills_cliplint(tmp_path):
    records = fuzz_parser.lint(SAMPLE, tmp_path)
    for name, found in records.items():
        codes = {record["code"] for record in found}
        assert codes, f"{name}: no finding and no CL000"
        if not name.endswith("_10.py"):  # deeper than the limit, or flat and long: linted or refused
            assert "CL001" in codes or any(reason in r["message"] for r in found
                                           for reason in ("limit", "not parsed", "syntax error")), (name, found)


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.sampled_from(fuzz_parser.WRAPPERS), st.integers(1, 1_500)), min_size=1, max_size=4))
def test_the_gate_bounds_libcsts_nesting_of_any_mixture(wrappers):
    """What `nesting` counts on CPython's tree, the lexical bound never undercounts, and a text
    the gate lets through has no more levels than MAX_DEPTH."""
    text = fuzz_parser.mixture(wrappers)
    refused, _ = assess(text)
    tree = cpython_tree(text)
    if tree is not None:
        levels = nesting(tree)[0]
        assert lexical_nesting(text)[0] >= levels - 2  # the Module and Assign levels have no token
        assert (refused is None) == (levels <= MAX_DEPTH) or "brackets" in refused.message


DEEP_CONFIGS = {
    "deep.yaml": ("clipnorm: 1\na: " + "[" * 30_000 + "]" * 30_000 + "\n", 2, "YAML nested more than 100"),
    "blocks.yaml": ("clipnorm: 1\n" + "".join(" " * i + f"k{i}:\n" for i in range(3_000)) + "  " * 3_000 + "v: 1\n",
                    102, "YAML nested more than 100"),
    "dashes.yaml": ("clipnorm: 1\nitems:\n" + "- " * 5_000 + "a\n", 3, "YAML nested more than 100"),
    "deep.json": ('{"clipnorm": 1,\n "a": ' + "[" * 100_000 + "]" * 100_000 + "}", 2, "JSON nested more than 100"),
    "deep.toml": ("clipnorm = 1\na = " + "[" * 100_000 + "]" * 100_000 + "\n", 2, "TOML nested more than 100"),
    "deep.ipynb": ('{"cells": ' + "[" * 100_000 + "]" * 100_000 + ', "x": "clipnorm"}', 1, "not a notebook"),
}


def test_deep_configs_and_notebooks_get_one_cl000_at_their_line(tmp_path):
    for name, (text, _, _) in DEEP_CONFIGS.items():
        (tmp_path / name).write_text(text)
    found = by_file(run_cliplint(tmp_path, *DEEP_CONFIGS))
    for name, (_, line, message) in DEEP_CONFIGS.items():
        [(code, at, said)] = found[name]
        assert (code, at) == ("CL000", line) and message in said, (name, found[name])


def test_a_config_within_the_bound_keeps_its_positions(tmp_path):
    """libyaml's marks are the pure-Python loader's: the finding is at `clipvalue`."""
    nested = "optimizer:\n  config:\n    name: adam\n    clipnorm: 1.0\n    clipvalue: 0.5\n    x: " \
             + "[" * 90 + "]" * 90 + "\n"
    (tmp_path / "train.yaml").write_text(nested)
    records = run_cliplint(tmp_path, "train.yaml")
    assert [(r["code"], r["line"], r["column"]) for r in records] == [("CL001", 5, 5)]


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient, tmp_path):
    await lsp_client.initialize_session(initialize_params(tmp_path, editor_capabilities()))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_the_language_server_survives_buffers_the_parser_cannot_take(client, tmp_path):
    """Each buffer gets its CL000 at its line; the server stays up and lints the next version."""
    uri = (tmp_path / "train.py").as_uri()
    mark = len(client.published)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_item(uri, HEADER)))
    assert [d.code for d in await published(client, uri, mark, 1)] == ["CL001"]
    for version, (name, (body, line)) in enumerate(ATTACKS.items(), 2):
        mark = len(client.published)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=HEADER + body)]))
        diagnostics = await published(client, uri, mark, version)
        assert [(d.code, d.range.start.line + 1) for d in diagnostics] == [("CL000", line)], name
    mark = len(client.published)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=99),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=HEADER)]))
    assert [d.code for d in await published(client, uri, mark, 99)] == ["CL001"]
