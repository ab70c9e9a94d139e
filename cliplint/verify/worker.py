"""The isolated verifier process: imports TensorFlow once, then answers probes over a pipe.

Protocol: one JSON object per line. The worker first writes
`{"ready": true, "tensorflow": ..., "keras": ..., "flavour": ...}`; then, for each request
`{"probe": {...}}` on stdin, one response `{"verdict", "evidence", "assumptions"}`.
Whatever TensorFlow prints goes to stderr, never into the protocol.
"""
from __future__ import annotations

import json
import os
import resource
import sys


def _limit_memory() -> None:
    limit = int(os.environ.get("CLIPLINT_VERIFY_MEMORY", str(4 * 1024 ** 3)))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main() -> int:
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _limit_memory()
    from . import probes  # imports TensorFlow

    protocol.write(json.dumps({"ready": True, **probes.versions()}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = probes.run(request["probe"])
        except MemoryError:
            answer = probes.verdict("inconclusive", "the probe ran out of memory (worker memory limit)")
        except Exception as err:  # a probe bug must not take the worker down
            answer = probes.verdict("inconclusive", f"the probe failed: {type(err).__name__}: {err}")
        protocol.write(json.dumps(answer, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
