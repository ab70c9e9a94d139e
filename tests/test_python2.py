"""A Python 2 file (TF 1's era) is linted as the Python 3 it otherwise is (`cliplint/python2.py`):
its syntax error is still reported, with the lines read differently, and nothing is fixed."""
import json
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from cliplint.python2 import readable

PYTHON2 = textwrap.dedent("""\
    import tensorflow as tf

    def train(x, y_):
        y = tf.nn.softmax(tf.matmul(x, W) + b)
        print "building the loss", y
        cross_entropy = -tf.reduce_sum(y_ * tf.log(y))
        try:
            step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)
        except ValueError, err:
            print >>log, err
            raise
        print
        print "step",
        return step
""")


def test_a_python2_file_is_linted_and_its_syntax_error_still_reported(tmp_path, run_cli):
    (tmp_path / "train.py").write_text(PYTHON2)
    records = json.loads(run_cli("--output-format", "json", "--no-cache", "train.py").stdout)
    found = {(r["line"], r["code"], r["severity"]) for r in records}
    assert found == {(5, "CL000", "error"), (6, "CL004", "error")}
    error = next(r for r in records if r["code"] == "CL000")
    assert "Python 2: lines 5, 9, 10, 12, 13 read as Python 3, the rest linted" in error["message"]
    assert all(r["fix"] is None for r in records)


def test_what_is_not_a_print_or_except_statement_stays_unparsable():
    assert readable(PYTHON2.replace('print "step",', "exec 'step = 1'")) is None
    assert readable("x = `1`\nprint x\n") is None
    assert readable('print ("fine in Python 3")\n') is None  # nothing to rewrite


def test_only_the_python2_lines_change():
    text, lines = readable(PYTHON2)
    before, after = PYTHON2.splitlines(), text.splitlines()
    assert len(before) == len(after)
    assert [n for n, (a, b) in enumerate(zip(before, after), 1) if a != b] == lines
    assert after[8] == "    except ValueError as err:"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["x = 1", "print(x)", "print (x, y)", "def f():", "    return 2",
                                 "for i in range(3):", "    pass", "# print x", "s = 'print x'"]), max_size=12))
def test_a_python3_file_is_never_rewritten(lines):
    text = "\n".join(lines) + "\n"
    try:
        compile(text, "<t>", "exec")
    except SyntaxError:
        return
    assert readable(text) is None


def test_a_print_statement_continued_over_lines_keeps_the_file_readable():
    """`print '... # game: %d' \\` then `% (...)` on the next line (async RL agents of 2016): the
    `#` is inside the string, the statement goes on, and the rest of the file is still linted."""
    text = textwrap.dedent("""\
        import tensorflow as tf

        def report(step, reward):
            print '\\nstep: %d, # game: %d' \\
                % (step, reward)
            print ("reward",
                   reward)
            print "done", (step,
                           reward)
            return tf.log(tf.nn.softmax(reward))
    """)
    rewritten, lines = readable(text)
    assert lines == [4, 8]
    assert rewritten.splitlines()[3] == "    _printed = '\\nstep: %d, # game: %d' \\"
    compile(rewritten, "report.py", "exec")
