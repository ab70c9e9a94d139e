"""`cliplint server`: a Language Server (LSP over stdio) giving editors cliplint's findings as they type.

documents.py  an editor's text (a file, a notebook's cells, a training config) -> findings
protocol.py   findings -> LSP diagnostics (positions in the client's encoding, codes, links)
changes.py    the changes offered: "Disable CLxxx for this line", a fix as one change of the text
pages.py      hover: the rule's page
verifier.py   `cliplint.verify`: the `--verify` session, started on demand
app.py        the server: sync, scheduling off the message loop, code actions, hover, commands;
              one `Tracked` record per open document

Needs pygls and lsprotocol (`pip install 'cliplint[lsp]'`); the rest of cliplint never imports this package.
"""
from __future__ import annotations

import signal
import sys

from .app import build


def serve() -> int:
    """Speak LSP on stdin/stdout until the editor says exit (or goes away), then stop the verifier;
    the exit code: 0 after a shutdown request, 1 without one (as the protocol asks). The console
    entry point exits without waiting for the thread still blocked reading stdin."""
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() must not corrupt the protocol stream
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    server = build()
    try:
        server.start_io(sys.stdin.buffer, protocol_out)
    finally:
        server.close()
    sys.stderr.flush()
    return 0 if server.shutdown_requested else 1
