"""Hover text: the rule's page (why, example, use instead) as Markdown, as `cliplint explain` prints it."""
from __future__ import annotations

from typing import Optional

from ..findings import UNREADABLE, Finding
from ..rules import ALL_RULES
from .protocol import rule_url


def rule_page(code: str) -> str:
    if code == UNREADABLE.code:
        page = f"# {UNREADABLE.code} {UNREADABLE.name}\n\n{UNREADABLE.summary} {UNREADABLE.explanation}\n"
    else:
        page = ALL_RULES[code].doc()
    return f"{page}\n[{code} online]({rule_url(code)})\n"


def hover_text(finding: Finding) -> str:
    """The finding's own message and verdict above its rule's page."""
    verdict: Optional[dict] = finding.verification
    said = f"**{finding.code}** {finding.message}"
    if verdict:
        said += f"\n\nVerified against TensorFlow: **{verdict['verdict']}**: {verdict['evidence']}"
    return f"{said}\n\n---\n\n{rule_page(finding.code)}"
