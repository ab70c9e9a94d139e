"""Content-hash result cache (`.cliplint_cache/`), and the safe storage it shares with the
verdict cache (`verify/verdicts.py`).

An entry is keyed by the file's bytes, the display path (findings carry it), the rules enabled
for the file, and cliplint's own code (its version and a fingerprint of its source files), so
an edit, a setting change or an upgrade can never return a stale result. A file with nothing to
report has an entry that is only its MAC: most files in a tree, one small read each.

The cache folder usually sits in the linted checkout, which may be hostile: it can ship the
folder with symbolic links in it, or with entries of its own. So nothing here follows a link:
every folder is opened with `O_NOFOLLOW` relative to its parent's descriptor (no component can be
swapped for a link after it was checked), the cache folder and its subfolders must belong to the
current user and be writable by nobody else, files are created with `O_EXCL` and renamed into
place, and every entry carries an HMAC-SHA256 of its name and contents under a per-user key kept
outside the checkout (`$XDG_CACHE_HOME/cliplint/verdict-key`, mode 0600, named for its first
use): a planted entry fails the MAC and is a miss. A cache that cannot be used safely is not
used (`CacheRefused` says why); a read-only or full disk only costs the cache, silently.
"""
from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import stat
from dataclasses import asdict
from functools import lru_cache
from typing import Dict, FrozenSet, List, Optional, Tuple

from . import __version__
from .files import NotRegularFile, open_regular, read_at_most, read_regular

KEY_NAME = "verdict-key"
KEY_BYTES = 32
MAC_CHARS = 64  # a hex HMAC-SHA256
ENTRY_LIMIT = 64 * 1024 * 1024  # a bigger entry is a miss (a file's findings are far smaller)
# getattr: Windows has none of these; there the descriptor-relative calls raise NotImplementedError
# and the run goes on without a cache.
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
MARKERS = ((".gitignore", b"# Created by cliplint automatically.\n*\n"),
           ("CACHEDIR.TAG", b"Signature: 8a477f597d28d172789f06886806bc55\n# cliplint result cache\n"))


class CacheRefused(Exception):
    """A cache folder or key file that is not safe to use: a link, not a folder, or not ours alone."""


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """cliplint's version plus the size and mtime of each of its source files."""
    root = os.path.dirname(os.path.abspath(__file__))
    parts = [__version__]
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            if name.endswith((".py", ".json")):
                info = os.stat(os.path.join(folder, name))
                parts.append(f"{os.path.relpath(os.path.join(folder, name), root)}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


# --- folders and files that no link can redirect ---------------------------------------------

def _open_folder(name: str, parent: int, display: str, create: bool, owned: bool = True) -> int:
    """The descriptor of folder `name` in `parent` (made 0700 when missing and `create`), never
    through a link; with `owned`, it must belong to the current user and be writable only by them."""
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
        except FileExistsError:
            pass
    try:
        descriptor = os.open(name, DIR_FLAGS | NOFOLLOW, dir_fd=parent)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise CacheRefused(_what(name, parent, display)) from None
        raise
    try:
        if owned:
            _check_ours(os.fstat(descriptor), display)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _what(name: str, parent: int, display: str) -> str:
    """Why `name` cannot be opened as a folder: it is a link, or something else."""
    try:
        is_link = stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode)
    except OSError:
        is_link = False
    return f"{display} is a symbolic link" if is_link else f"{display} is not a folder"


def _check_ours(info: os.stat_result, display: str, private: int = 0o022) -> None:
    if info.st_uid != os.geteuid():
        raise CacheRefused(f"{display} belongs to another user (uid {info.st_uid})")
    if info.st_mode & private:
        raise CacheRefused(f"{display} is open to other users (mode {stat.S_IMODE(info.st_mode):o})")


def _open_root(folder: str) -> int:
    """The cache folder's descriptor. Below the current folder (the checkout, usually) no
    component may be a link; elsewhere the folders above it are the user's choice, followed."""
    absolute = os.path.abspath(folder)
    relative = os.path.relpath(absolute)
    if relative == os.curdir or relative == os.pardir or relative.startswith(os.pardir + os.sep):
        os.makedirs(os.path.dirname(absolute), exist_ok=True)
        start, parts, display = os.path.dirname(absolute), [os.path.basename(absolute)], os.path.dirname(absolute)
    else:
        start, parts, display = os.curdir, relative.split(os.sep), ""
    descriptor = os.open(start, DIR_FLAGS)
    for index, part in enumerate(parts):
        display = os.path.join(display, part)
        try:
            child = _open_folder(part, descriptor, display, create=True, owned=index == len(parts) - 1)
        finally:
            os.close(descriptor)
        descriptor = child
    return descriptor


def _write_new(folder: int, data: bytes) -> str:
    """A new file (mode 0600) in `folder` holding `data`; its name, for a rename or link into place."""
    name = f".{os.getpid()}-{os.urandom(6).hex()}.tmp"
    descriptor = os.open(name, NEW_FILE_FLAGS, 0o600, dir_fd=folder)
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
    except BaseException:
        os.unlink(name, dir_fd=folder)
        raise
    return name


def _mark_folder(root: int) -> None:
    """A .gitignore and a CACHEDIR.TAG, unless the folder has them (or anything by those names)."""
    for name, text in MARKERS:
        try:
            descriptor = os.open(name, NEW_FILE_FLAGS, 0o644, dir_fd=root)
        except OSError:
            continue  # there already, perhaps as a link: left alone
        with os.fdopen(descriptor, "wb") as out:
            out.write(text)


_ROOTS: Dict[str, Tuple[Optional[int], str]] = {}  # once per process: see `release`
_STORES: Dict[Tuple[str, str], Tuple[Optional["Store"], str]] = {}


def _root(absolute: str, folder: str) -> Tuple[Optional[int], str]:
    """The cache folder, opened and marked once per process and place (`absolute`), or None and
    why (empty: an I/O error)."""
    if absolute not in _ROOTS:
        _ROOTS[absolute] = _opened_root(folder)
    return _ROOTS[absolute]


def _opened_root(folder: str) -> Tuple[Optional[int], str]:
    try:
        root = _open_root(folder)
    except CacheRefused as err:
        return None, str(err)
    except (OSError, NotImplementedError):
        return None, ""
    _mark_folder(root)
    return root, ""


# --- the per-user key ------------------------------------------------------------------------

def key_folder() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cliplint")


def user_key() -> Tuple[Optional[bytes], str]:
    """The per-user key (made on first use), or None and why it cannot be used."""
    return _user_key(key_folder())


@lru_cache(maxsize=None)
def _user_key(folder: str) -> Tuple[Optional[bytes], str]:
    try:
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        parent = os.open(os.path.dirname(folder), DIR_FLAGS)
        try:
            descriptor = _open_folder(os.path.basename(folder), parent, folder, create=True)
        finally:
            os.close(parent)
        try:
            return _read_or_make_key(descriptor, os.path.join(folder, KEY_NAME)), ""
        finally:
            os.close(descriptor)
    except CacheRefused as err:
        return None, str(err)
    except OSError:
        return None, ""


def _read_or_make_key(folder: int, display: str) -> bytes:
    try:
        return _read_key(folder, display)
    except FileNotFoundError:
        pass
    temporary = _write_new(folder, os.urandom(KEY_BYTES))
    try:
        os.link(temporary, KEY_NAME, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
    except FileExistsError:
        pass  # another run made it first: theirs is the key
    finally:
        os.unlink(temporary, dir_fd=folder)
    return _read_key(folder, display)


def _read_key(folder: int, display: str) -> bytes:
    try:
        descriptor, info = open_regular(KEY_NAME, folder, follow_symlinks=False)
    except NotRegularFile:
        raise CacheRefused(f"{display} is not a regular file") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise CacheRefused(f"{display} is a symbolic link") from None
        raise
    try:
        _check_ours(info, display, private=0o077)
        if info.st_size != KEY_BYTES:
            raise CacheRefused(f"{display} is not a {KEY_BYTES}-byte key (delete it to make a new one)")
        return read_at_most(descriptor, info, KEY_BYTES, display)
    finally:
        os.close(descriptor)


# --- authenticated entries -------------------------------------------------------------------

class Store:
    """The entries of one subfolder of the cache folder (`results`, `verdicts`), by hex name,
    in 256 subfolders; each file is the MAC of the store, the name and the body, then the body."""

    def __init__(self, root: int, name: str, secret: bytes, display: str) -> None:
        self.name = name
        self.secret = secret
        self.display = display
        self.descriptor = _open_folder(name, root, display, create=True)
        self.folders: Dict[str, int] = {}

    def close(self) -> None:
        for descriptor in (*self.folders.values(), self.descriptor):
            os.close(descriptor)
        self.folders.clear()

    def _folder(self, prefix: str, create: bool) -> Optional[int]:
        if prefix not in self.folders:
            try:
                self.folders[prefix] = _open_folder(prefix, self.descriptor, os.path.join(self.display, prefix), create)
            except (OSError, CacheRefused):
                return None  # a link or a stranger's folder there: those entries are misses
        return self.folders[prefix]

    def _mac(self, name: str, body: bytes) -> bytes:
        message = f"{self.name}\0{name}\0".encode() + body
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest().encode()

    def read(self, name: str) -> Optional[bytes]:
        """The body of an authentic entry, else None (missing, planted, corrupt, not a plain file)."""
        folder = self._folder(name[:2], create=False)
        if folder is None:
            return None
        try:
            data = read_regular(name[2:] + ".json", ENTRY_LIMIT, folder, follow_symlinks=False)
        except OSError:
            return None
        body = data[MAC_CHARS:]
        return body if hmac.compare_digest(data[:MAC_CHARS], self._mac(name, body)) else None

    def write(self, name: str, body: bytes) -> None:
        """Write via a new file renamed into place: two runs sharing the cache never see half an entry."""
        folder = self._folder(name[:2], create=True)
        if folder is None:
            return
        try:
            temporary = _write_new(folder, self._mac(name, body) + body)
            try:
                os.replace(temporary, name[2:] + ".json", src_dir_fd=folder, dst_dir_fd=folder)
            except OSError:
                os.unlink(temporary, dir_fd=folder)
                raise
        except OSError:
            pass  # a read-only or full disk only costs the cache


def open_store(folder: str, name: str) -> Tuple[Optional[Store], str]:
    """The store `name` of the cache folder, once per process, or None and why (empty when the
    reason is an ordinary I/O error, which only costs the cache: no warning)."""
    return _open_store(os.path.abspath(folder), folder, name)


def _open_store(absolute: str, folder: str, name: str) -> Tuple[Optional[Store], str]:
    if (absolute, name) not in _STORES:
        _STORES[(absolute, name)] = _opened_store(absolute, folder, name)
    return _STORES[(absolute, name)]


def _opened_store(absolute: str, folder: str, name: str) -> Tuple[Optional[Store], str]:
    root, why = _root(absolute, folder)
    if root is None:
        return None, why
    secret, why = user_key()
    if secret is None:
        return None, why
    try:
        return Store(root, name, secret, os.path.join(folder, name)), ""
    except CacheRefused as err:
        return None, str(err)
    except OSError:
        return None, ""


class Cache:
    """Result entries: a file's findings and whether a rule crashed on it."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @staticmethod
    def key(content: bytes, display: str, codes, extra: str = "") -> str:
        digest = hashlib.sha256()
        for part in (code_fingerprint(), display, ",".join(sorted(codes)), extra):
            digest.update(part.encode() + b"\0")
        digest.update(content)
        return digest.hexdigest()

    def get(self, key: str) -> Optional[Tuple[List[dict], bool, Dict[str, str]]]:
        """(findings, crashed, reads): `reads` maps each project module whose summary the
        result depends on to that summary's hash (the result holds while they are the same)."""
        body = self.store.read(key)
        if body is None:
            return None
        if not body:
            return [], False, {}  # most files: nothing found, an entry that is only its MAC
        try:
            entry = json.loads(body)
            return entry["findings"], entry["crashed"], dict(entry.get("reads", {}))
        except (ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, findings, crashed: bool, reads: Optional[Dict[str, str]] = None) -> None:
        body = b""
        if findings or crashed or reads:
            entry = {"findings": [asdict(f) for f in findings], "crashed": crashed}
            if reads:
                entry["reads"] = reads
            body = json.dumps(entry).encode()
        self.store.write(key, body)


def result_cache(folder: str) -> Tuple[Optional[Cache], str]:
    """The result cache in `folder`, or None and why it is not used (see `open_store`)."""
    store, why = open_store(folder, "results")
    return (Cache(store) if store is not None else None), why


# --- the last run, by what `stat` says of each file ---------------------------------------

StatKey = Tuple[int, int, int, int, int]  # size, mtime_ns, ctime_ns, inode, device


def stat_key(path: str) -> Optional[StatKey]:
    """What `os.stat` says of a file, or None when it cannot say. The change time is set by the
    kernel on every write and cannot be set by anyone (`touch -d` sets the modification time
    only), so an unchanged key means unchanged bytes."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev


@lru_cache(maxsize=64)
def codes_text(codes: FrozenSet[str]) -> str:
    """The enabled codes as the last run's entry records them (most files share one set)."""
    return ",".join(sorted(codes))


class LastRun:
    """One entry in the results store holding a whole run's results, keyed by display path,
    each with the file's `stat_key`, the codes enabled for it and the size limit it was read
    under: a warm run reads this one entry and stats each file instead of reading and hashing
    every file and reading an entry for each (ruff's cache is keyed by file metadata too).
    Authenticated like every entry; one per cliplint build, working folder and set of paths."""

    def __init__(self, cache: Cache, paths) -> None:
        self.cache = cache
        self.name = self.entry_name(paths)
        body = cache.store.read(self.name)
        try:
            self.entries: Dict[str, list] = json.loads(body) if body else {}
        except ValueError:
            self.entries = {}

    @staticmethod
    def entry_name(paths) -> str:
        digest = hashlib.sha256()
        for part in (code_fingerprint(), "last run", os.getcwd(), *sorted(os.path.abspath(p) for p in paths)):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()

    def get(self, display: str, key: Optional[StatKey], codes, limit: int, probes: bool = True
            ) -> Optional[Tuple[List[dict], List[Optional[dict]], bool]]:
        """(finding records, their probes, crashed) when the file's stat, codes and size limit
        are those recorded. The probes (a third of the entry) are decoded only when `probes`:
        a run that does not verify never reads them (each is None then)."""
        entry = self.entries.get(display)
        if key is None or not isinstance(entry, list) or len(entry) != 6:
            return None
        known, known_codes, known_limit, findings, crashed, stored = entry
        if known != list(key) or known_codes != codes_text(codes) or known_limit != limit:
            return None
        payloads = json.loads(stored) if probes and stored else [None] * len(findings)
        return findings, payloads, crashed

    @staticmethod
    def entry(key: StatKey, codes, limit: int, findings, crashed: bool) -> list:
        """A file's entry: its stat, codes and size limit, its findings' records without their
        probes, whether a rule crashed, and the probes as one JSON text ("" when none has one),
        which a warm run that does not verify skips as one string instead of parsing it."""
        records = [asdict(finding) for finding in findings]
        payloads = [record.pop("probe") for record in records]
        probes = json.dumps(payloads, separators=(",", ":")) if any(p is not None for p in payloads) else ""
        return [list(key), codes_text(codes), limit, records, crashed, probes]

    def save(self, entries: Dict[str, list]) -> None:
        """Replace the entry when anything differs from what was read."""
        if entries != self.entries:
            self.cache.store.write(self.name, json.dumps(entries, separators=(",", ":")).encode())


def release() -> None:
    """Close the cache folders and stores this process opened, and forget them and the user key:
    a process running cliplint several times (the test suite, in process) starts each run as a
    new process would, without keeping descriptors from the last."""
    for store, _ in _STORES.values():
        if store is not None:
            store.close()
    for root, _ in _ROOTS.values():
        if root is not None:
            os.close(root)
    _STORES.clear()
    _ROOTS.clear()
    _user_key.cache_clear()
