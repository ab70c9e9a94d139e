"""Incremental linting of an editor's buffer: only the top-level statements an edit touched
are parsed, indexed and placed again (see `document`)."""
from .document import Document

__all__ = ["Document"]
