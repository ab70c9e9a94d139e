"""Hover text: the rule's page (why, example, use instead) as Markdown, as `cliplint explain` prints it."""
from __future__ import annotations

from typing import Optional

from ..findings import Finding
from ..report.links import rule_page, rule_url


def hover_text(finding: Finding) -> str:
    """The finding's own message and verdict above its rule's page."""
    verdict: Optional[dict] = finding.verification
    said = f"**{finding.code}** {finding.message}"
    if verdict:
        said += f"\n\nVerified against TensorFlow: **{verdict['verdict']}**: {verdict['evidence']}"
    return f"{said}\n\n---\n\n{rule_page(finding.code)}\n[{finding.code} online]({rule_url(finding.code)})\n"
