"""Bytes in and out of files: decoding Python source, writing a file atomically, and what an edit
changed between two versions of a text."""
from __future__ import annotations

import io
import os
import stat
import tokenize
from typing import Optional, Tuple

from .findings import Finding, bad_input


def decode_python(path: str, data: bytes) -> Tuple[Optional[str], Optional[Finding]]:
    """Source text honouring PEP 263, or a CL000 finding saying why it cannot be read."""
    if b"\x00" in data:
        return None, bad_input(path, "binary file (contains NUL bytes); not linted")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as err:
        return None, bad_input(path, f"invalid encoding declaration: {err}")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        declared = "declared" if encoding != "utf-8" else "no PEP 263 declaration, so UTF-8"
        return None, bad_input(
            path, f"cannot decode byte 0x{data[err.start]:02x} as {encoding} ({declared}); "
            "add a '# -*- coding: ... -*-' line or re-encode the file", line, column)
    except LookupError:
        return None, bad_input(path, f"unknown encoding {encoding!r} in the coding declaration")
    return text.lstrip("\ufeff"), None


def encode_python(text: str, original: bytes) -> bytes:
    """`text` in the encoding `original` was read with (its PEP 263 declaration, its BOM kept)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(original).readline)
    return text.encode(encoding)


def write_atomically(path: str, text: str) -> None:
    """Write via a temporary file in the same folder and rename: never a half-written file."""
    write_bytes_atomically(path, text.encode("utf-8"))


def write_bytes_atomically(path: str, data: bytes) -> None:
    """The same for bytes; an existing file keeps its permissions (a fixed script stays executable)."""
    import tempfile  # 10 ms to import: only when something is written

    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".cliplint-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        if os.path.exists(path):
            os.chmod(temporary, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def common_ends(old: str, new: str) -> Tuple[int, int]:
    """How many characters two texts share at the start, and then at the end (the two never
    overlap): what lies between is what an edit changed. A binary search over slice
    comparisons, which run at C speed, so a keystroke in a big file costs microseconds."""
    same_start = _longest(min(len(old), len(new)), lambda length: old[:length] == new[:length])
    same_end = _longest(min(len(old), len(new)) - same_start,
                        lambda length: old[len(old) - length:] == new[len(new) - length:])
    return same_start, same_end


def _longest(limit: int, agree) -> int:
    """The largest length up to `limit` for which `agree(length)` holds (it holds for all shorter)."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if agree(middle):
            low = middle
        else:
            high = middle - 1
    return low
