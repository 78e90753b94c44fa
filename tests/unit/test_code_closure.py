"""The files a module runs, found from its imports (`code_closure`), on a throwaway checkout,
and the one thing `ast` cannot see: a module of the product imported by name."""

from __future__ import annotations

import ast
from pathlib import Path

from experiments.repro import code_closure

SRC = code_closure.ROOT / "src" / "recsync"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_closure_follows_imports_transitively_with_their_packages(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "experiments/__init__.py": "",
            "experiments/repro/__init__.py": "",
            "experiments/repro/toy.py": "from experiments.repro import helper\nimport numpy\n",
            "experiments/repro/helper.py": (
                "def f():\n    from recsync.sim.cost import Cost\n    return Cost\n"
            ),
            "experiments/repro/other.py": "X = 1\n",
            "src/recsync/__init__.py": "",
            "src/recsync/sim/__init__.py": "from recsync.sim import clock\n",
            "src/recsync/sim/clock.py": "",
            "src/recsync/sim/cost.py": "from .clock import *\n",
            "src/recsync/cli.py": "import recsync.sim.cost\n",
        },
    )
    found = code_closure.closure("experiments.repro.toy", tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "experiments/__init__.py",
        "experiments/repro/__init__.py",
        "experiments/repro/helper.py",
        "experiments/repro/toy.py",
        "src/recsync/__init__.py",
        "src/recsync/sim/__init__.py",
        "src/recsync/sim/clock.py",
        "src/recsync/sim/cost.py",
    ]  # an import inside a function counts; other.py, cli.py and numpy do not
    skipped = code_closure.closure("experiments.repro.toy", tmp_path, ["experiments.repro.helper"])
    assert not any("recsync" in p.as_posix() for p in skipped)


def test_every_import_by_name_of_the_product_is_listed() -> None:
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
            ):
                continue
            argument = node.args[0]
            literal = isinstance(argument, ast.Constant) and isinstance(argument.value, str)
            if literal and not str(argument.value).startswith("recsync"):
                continue  # a third-party module: not the checkout's code
            assert module in code_closure.IMPORTED_BY_NAME, (path, ast.unparse(node))


def test_the_simulated_reproductions_run_the_families_the_registry_imports_by_name() -> None:
    found = code_closure.closure("experiments.repro.psp")
    assert SRC / "families" / "gradient" / "psp.py" in found
    assert SRC / "app" / "cli" / "main.py" not in found
