"""Verdicts kept in the result cache (`<cache>/verdicts/`), so that a second `--verify` run over
unchanged code answers from it without starting TensorFlow.

An entry is keyed by the probe's content (the rebuilt snippets layer 1 would send, which carry the
rule and kind), the installed TensorFlow, Keras and tf-keras versions, the Keras flavour chosen by
`TF_USE_LEGACY_KERAS`, and cliplint's own code fingerprint: an upgrade of any of them is a miss.
The cache folder usually sits in the linted (possibly hostile) checkout: entries are kept by
`cache.Store`, which follows no link and authenticates every entry with an HMAC-SHA256 under a
per-user key kept outside the checkout, so an entry planted there fails the MAC and is a miss,
never a forged verdict. The entry's name (hashed from the probe) is under the MAC. Only
verdicts a worker reached are kept (never a timeout, a spent budget or a worker that died).
"""
from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from importlib import metadata
from typing import Optional

from ..cache import code_fingerprint, open_store

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


class VerdictCache:
    def __init__(self, folder: str) -> None:
        self.store, _ = open_store(folder, "verdicts")  # refused: the result cache has said why

    @staticmethod
    def _name(probe_key: str) -> str:
        digest = hashlib.sha256()
        for part in (code_fingerprint(), installed_versions(), probe_key):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()

    def get(self, probe_key: str) -> Optional[dict]:
        body = self.store.read(self._name(probe_key)) if self.store is not None else None
        if body is None:
            return None
        try:
            entry = json.loads(body)
            return {field: entry[field] for field in FIELDS}
        except (ValueError, KeyError, TypeError):
            return None

    def put(self, probe_key: str, verdict: dict) -> None:
        if self.store is not None:
            body = json.dumps({field: verdict.get(field) for field in FIELDS}, sort_keys=True)
            self.store.write(self._name(probe_key), body.encode())
