"""The isolated verifier process: locks itself down, imports TensorFlow once, answers probes.

    python -m cliplint.verify.worker --key-fd N --memory BYTES [--unchecked] [--unsandboxed] [--test-only-off L,...]

Protocol: one line per message on the pre-opened pipes (stdin: requests, stdout: answers). Every
answer is `<hex HMAC-SHA256> <json>`, keyed by a per-run key the parent writes to descriptor N,
which the worker reads and closes before any snippet exists; the JSON carries the request's id.
The parent rejects any other line. The first answer, `{"id": 0, "ready": true, versions, layers}`,
says which lock-down layers are active. Whatever TensorFlow prints goes to stderr (a log file).

`--unchecked` (the parent passes it only under its test-only hook) runs snippets as written, with
every builtin: the red-team tests use it to show that layer 2 alone holds. `--test-only-off
LAYER,...` (likewise) switches lock-down layers off, to show what the others hold.

Fail closed: when a lock-down layer is unavailable and `--unsandboxed` (the user's
--verify-unsandboxed) is not given, the first answer is `{"id": 0, "ready": false, "refused": true,
layers}` and the worker exits without running anything (before TensorFlow is imported when the
missing layer is known by then).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable

from . import sandbox
from .channel import sign


def _read_key(fd: int) -> bytes:
    with os.fdopen(fd, "rb") as pipe:
        return pipe.read()


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--key-fd", type=int, required=True)
    parser.add_argument("--memory", type=int, required=True)
    parser.add_argument("--unchecked", action="store_true")
    parser.add_argument("--unsandboxed", action="store_true")
    parser.add_argument("--test-only-off", default="")
    return parser.parse_args()


def main() -> int:
    options = _options()
    try:
        sandbox.die_with_parent()
    except OSError:
        pass  # not Linux: reported as missing layers
    key = _read_key(options.key_fd)
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # TensorFlow's prints go to the log

    def answer(request_id: int, body: dict) -> None:
        text = json.dumps({"id": request_id, **body}, default=str)
        protocol.write(f"{sign(key, text)} {text}\n")

    layers: dict = {}
    off = frozenset(filter(None, options.test_only_off.split(",")))
    sandbox.before_import(os.getcwd(), options.memory, layers, off)
    if _refuses(layers, options, answer):
        return 0
    from . import probes  # imports TensorFlow

    probes.set_unchecked(options.unchecked)
    sandbox.after_import(layers)
    if _refuses(layers, options, answer):
        return 0
    answer(0, {"ready": True, **probes.versions(), "layers": layers})
    for line in sys.stdin:
        request = json.loads(line)
        answer(request["id"], {"answer": _run(probes, request["probe"])})
    return 0


def _refuses(layers: dict, options: argparse.Namespace, answer: Callable[[int, dict], None]) -> bool:
    """Fail closed: a missing layer stops the worker before any snippet, unless the user opted in."""
    if options.unsandboxed or not list(sandbox.layers_missing(layers)):
        return False
    answer(0, {"ready": False, "refused": True, "layers": layers})
    return True


def _run(probes, probe: dict) -> dict:
    try:
        return probes.run(probe)
    except MemoryError:
        return probes.verdict("inconclusive", "the probe ran out of memory (worker memory limit)")
    except RecursionError:
        return probes.verdict("inconclusive", "the probe failed: RecursionError")
    except Exception as err:  # a probe bug must not take the worker down; its text is not shown
        return probes.verdict("inconclusive", f"the probe failed: {type(err).__name__}")


if __name__ == "__main__":
    sys.exit(main())
