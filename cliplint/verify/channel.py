"""The verdict channel's authentication: HMAC-SHA256 with a per-run key (see worker.py)."""
from __future__ import annotations

import hashlib
import hmac


def sign(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def authentic(key: bytes, mac: str, body: str) -> bool:
    return hmac.compare_digest(mac.encode(), sign(key, body).encode())
