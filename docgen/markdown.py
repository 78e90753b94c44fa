"""Markdown pieces the generated pages share."""

from __future__ import annotations


def cell(text: str) -> str:
    """`text` as a Markdown table cell (its pipes escaped, on one line)."""
    return text.replace("|", "\\|").replace("\n", " ")
