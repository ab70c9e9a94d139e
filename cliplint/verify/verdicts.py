"""Verdicts kept in the result cache (`<cache>/verdicts/`), so that a second `--verify` run over
unchanged code answers from it without starting TensorFlow.

An entry is keyed by the probe's content (the rebuilt snippets layer 1 would send, which carry the
rule and kind), the installed TensorFlow, Keras and tf-keras versions, the Keras flavour chosen by
`TF_USE_LEGACY_KERAS`, and cliplint's own code fingerprint: an upgrade of any of them is a miss.
The cache folder usually sits in the linted (possibly hostile) checkout, so every entry carries an
HMAC-SHA256 under a per-user key kept outside it (`$XDG_CACHE_HOME/cliplint/verdict-key`, mode
0600): an entry planted in the checkout fails the MAC and is a miss, never a forged verdict. Only
verdicts a worker reached are kept (never a timeout, a spent budget or a worker that died).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from importlib import metadata
from typing import Optional

from ..cache import code_fingerprint
from .channel import authentic, sign

KEY_BYTES = 32
FIELDS = ("verdict", "evidence", "assumptions", "tensorflow", "keras", "flavour")


@lru_cache(maxsize=1)
def installed_versions() -> str:
    """The installed TensorFlow/Keras distributions and the flavour setting, read from package
    metadata (cheap: nothing is imported)."""
    found = [f"{name}=={_version(name)}" for name in ("tensorflow", "tensorflow-cpu", "keras", "tf-keras")]
    found.append(f"TF_USE_LEGACY_KERAS={os.environ.get('TF_USE_LEGACY_KERAS', '')}")
    return ";".join(found)


def expected_versions() -> dict:
    """The versions and flavour a worker would report, from package metadata: what a verdict that
    needed no worker (skipped, or from the cache) carries."""
    tensorflow = _version("tensorflow") or _version("tensorflow-cpu")
    legacy = os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true") and _version("tf-keras")
    return {"tensorflow": tensorflow, "keras": _version("tf-keras") if legacy else _version("keras"),
            "flavour": "tf-keras" if legacy else "Keras 3"}


def _version(distribution: str) -> Optional[str]:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _key_file() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cliplint", "verdict-key")


def _secret() -> Optional[bytes]:
    """The per-user key (made on first use), or None when it cannot be kept (then nothing is cached)."""
    path = _key_file()
    try:
        with open(path, "rb") as handle:
            key = handle.read()
        if len(key) == KEY_BYTES:
            return key
    except OSError:
        pass
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        key = os.urandom(KEY_BYTES)
        handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path))
        with os.fdopen(handle, "wb") as out:
            out.write(key)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
        return key
    except OSError:
        return None


class VerdictCache:
    def __init__(self, folder: str) -> None:
        self.folder = os.path.join(folder, "verdicts")
        self.secret = _secret()

    def _path(self, probe_key: str) -> str:
        digest = hashlib.sha256()
        for part in (code_fingerprint(), installed_versions(), probe_key):
            digest.update(part.encode() + b"\0")
        name = digest.hexdigest()
        return os.path.join(self.folder, name[:2], name[2:] + ".json")

    def get(self, probe_key: str) -> Optional[dict]:
        if self.secret is None:
            return None
        try:
            with open(self._path(probe_key), encoding="utf-8") as handle:
                mac, _, body = handle.read().partition(" ")
            if not authentic(self.secret, mac, probe_key + "\0" + body):
                return None
            entry = json.loads(body)
            return {field: entry[field] for field in FIELDS}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, probe_key: str, verdict: dict) -> None:
        if self.secret is None:
            return
        body = json.dumps({field: verdict.get(field) for field in FIELDS}, sort_keys=True)
        path = self._path(probe_key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(f"{sign(self.secret, probe_key + chr(0) + body)} {body}")
            os.replace(temporary, path)
        except OSError:
            pass  # a read-only or full disk only costs the cache
