from pathlib import Path

from cliplint.docs import pages

RULES_DIR = Path(__file__).resolve().parent.parent / "rules"


def test_rule_pages_are_current():
    """Regenerate with `python -m cliplint.docs` when this fails."""
    for name, text in pages().items():
        page = RULES_DIR / name
        assert page.exists(), f"missing rules/{name}"
        assert page.read_text(encoding="utf-8") == text, f"rules/{name} is stale: run python -m cliplint.docs"
    extra = {p.name for p in RULES_DIR.glob("*.md")} - set(pages())
    assert not extra, f"pages for rules that no longer exist: {extra}"
