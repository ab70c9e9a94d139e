"""Rule pages (`rule_page`) and where they are published: the `Documentation` and `Homepage` URLs of
pyproject.toml's `[project.urls]`, read from the installed distribution's metadata.

`Documentation` is the folder the rule reference (`rules/` of the repository) is published
at: `CLxxx.md` per rule and `README.md`, the index. The fallbacks are used only when the
metadata is missing (cliplint run from a source tree that was never installed); a test keeps
them equal to pyproject.toml.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Dict

from ..findings import UNREADABLE

FALLBACK = {
    "Homepage": "https://github.com/cliplint/cliplint",
    "Documentation": "https://github.com/cliplint/cliplint/blob/main/rules",
}


@lru_cache(maxsize=1)
def project_urls() -> Dict[str, str]:
    """Label -> URL of `[project.urls]`, as installed (`Project-URL: Label, URL` lines)."""
    from importlib.metadata import PackageNotFoundError, metadata  # 30 ms: only when a URL is shown

    try:
        entries = metadata("cliplint").get_all("Project-URL") or []
    except PackageNotFoundError:
        entries = []
    urls = {}
    for entry in entries:
        label, _, url = entry.partition(",")
        urls[label.strip()] = url.strip().rstrip("/")
    return {label: urls.get(label, fallback) for label, fallback in FALLBACK.items()}


def homepage() -> str:
    return project_urls()["Homepage"]


def rule_url(code: str) -> str:
    """A rule's page; CL000, which is not a rule class, is described on the index."""
    page = "README.md" if code == UNREADABLE.code else f"{code}.md"
    return f"{project_urls()['Documentation']}/{page}"


def rule_page(code: str) -> str:
    """A rule's documentation in Markdown, as `cliplint explain` prints it and SARIF carries it."""
    from ..rules import ALL_RULES  # imports libcst: only when a page is asked for

    if code == UNREADABLE.code:
        return f"# {UNREADABLE.code} {UNREADABLE.name}\n\n{UNREADABLE.summary} {UNREADABLE.explanation}\n"
    return ALL_RULES[code].doc()
