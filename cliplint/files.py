"""Bytes in and out of files: reading a file of a (possibly hostile) checkout, decoding Python
source, writing a file atomically, and what an edit changed between two versions of a text."""
from __future__ import annotations

import errno
import io
import os
import stat
import tokenize
from typing import Optional, Tuple

from .findings import Finding, bad_input


class NotRegularFile(OSError):
    """A FIFO, a device, a socket or a folder where a file was expected: never read (a link to
    `/dev/zero` reports size 0 and never ends; opening a FIFO waits for a writer)."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.EINVAL, "not a regular file (a FIFO, a device or a socket)", path)


class FileTooLarge(OSError):
    """A file above the size limit: `size` is what `fstat` says, or what was read when the file
    grew past the limit while being read."""

    def __init__(self, path: str, size: int) -> None:
        super().__init__(errno.EFBIG, f"{size:,} bytes", path)
        self.size = size


NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # Windows has no FIFOs to wait on, and no such flag
READ_FLAGS = os.O_RDONLY | NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def open_regular(path: str, dir_fd: Optional[int] = None, follow_symlinks: bool = True) -> Tuple[int, os.stat_result]:
    """A descriptor of a regular file and its `fstat`, else NotRegularFile. The open never blocks
    (`O_NONBLOCK`, cleared once the file is known to be regular); `follow_symlinks=False` refuses
    a link (`O_NOFOLLOW`: ELOOP)."""
    flags = READ_FLAGS | (0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0))
    descriptor = os.open(path, flags, dir_fd=dir_fd)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(path)
        if NONBLOCK:
            os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor, info


def read_at_most(descriptor: int, info: os.stat_result, limit: int, path: str) -> bytes:
    """At most `limit` bytes, else FileTooLarge, whatever `info` (the file's `fstat`) said: a
    file can grow while it is read. Reads sized by `info`, so a small file costs no big buffer."""
    if info.st_size > limit:
        raise FileTooLarge(path, info.st_size)
    chunks, total = [], 0
    while total <= limit:
        chunk = os.read(descriptor, min(limit + 1 - total, max(info.st_size + 1 - total, 1 << 16)))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:
        raise FileTooLarge(path, total)
    return b"".join(chunks)


def read_regular(path: str, limit: int, dir_fd: Optional[int] = None, follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file of at most `limit` bytes: how every file of a checkout is read.
    NotRegularFile, FileTooLarge or another OSError otherwise."""
    descriptor, info = open_regular(path, dir_fd, follow_symlinks)
    try:
        return read_at_most(descriptor, info, limit, path)
    finally:
        os.close(descriptor)


def decode_python(path: str, data: bytes) -> Tuple[str, Optional[Finding]]:
    """Source text honouring PEP 263 and None; or "" and a CL000 finding saying why it cannot be read."""
    if b"\x00" in data:
        return "", bad_input(path, "binary file (contains NUL bytes); not linted")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as err:
        return "", bad_input(path, f"invalid encoding declaration: {err}")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        declared = "declared" if encoding != "utf-8" else "no PEP 263 declaration, so UTF-8"
        return "", bad_input(
            path, f"cannot decode byte 0x{data[err.start]:02x} as {encoding} ({declared}); "
            "add a '# -*- coding: ... -*-' line or re-encode the file", line, column)
    except LookupError:
        return "", bad_input(path, f"unknown encoding {encoding!r} in the coding declaration")
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
