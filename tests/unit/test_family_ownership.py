"""No code outside the strategy families asks which family or strategy it holds: no
`isinstance`, `hasattr` or `getattr` on a strategy or family object anywhere in
`src/recsync` but `families/` (what the rest needs is a `Family` hook; import-linter keeps
the app, the drivers and the kernel from importing a family's package)."""

from __future__ import annotations

import ast
from pathlib import Path

import recsync

SRC = Path(recsync.__file__).parent
ASKING = {"isinstance", "hasattr", "getattr"}
PLAIN_TYPES = {"dict", "list", "str", "int", "float", "tuple", "Mapping", "Sequence"}


def _askings(text: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(text)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id not in ASKING or not node.args:
            continue
        subject = ast.unparse(node.args[0]).lower()
        if "strateg" not in subject and "family" not in subject:
            continue
        kind = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
        if node.func.id == "isinstance" and kind in PLAIN_TYPES:
            continue  # a config table read as plain data, not a strategy
        found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_code_outside_the_families_asks_which_strategy_it_holds() -> None:
    paths = [p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] != "families"]
    assert len(paths) > 100
    assert [a for p in paths for a in _askings(p.read_text(), str(p.relative_to(SRC)))] == []


def test_the_check_sees_such_a_question_and_lets_plain_data_be() -> None:
    text = (
        "def f(spec, table):\n"
        "    if isinstance(table.get('strategy'), dict):\n"
        "        return None\n"
        "    return hasattr(spec.strategy, 'groups')\n"
    )
    assert _askings(text, "probe.py") == ["probe.py:4: hasattr(spec.strategy, 'groups')"]
