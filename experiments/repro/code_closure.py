"""The files a module runs: the module and, transitively, every module of this checkout it
imports (experiments/ and src/recsync/, the packages' `__init__.py` on the way), found by
reading the import statements, so nothing is imported to find them. This is what a
reproduction's report depends on (`stamp.dependencies`) and what its cached points are keyed
by (`points.code_fingerprint`): a change to any of these files can change a number, a change
elsewhere (the CLI, the Ray engine for a simulated reproduction, another reproduction) cannot.

An import by name at run time is invisible to `ast`; those of the product are listed in
`IMPORTED_BY_NAME` (a test finds every `import_module` call of src/ and checks it is)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: experiments/ and src/ in it
PACKAGES = ("experiments", "recsync")  # the checkout's own top-level packages
IMPORTED_BY_NAME = {  # importlib, not `import`: a module -> what it imports by name
    "recsync.strategy.registry": ("recsync.families",),
    "recsync.app.cli.experiments": ("experiments", "experiments.repro"),
    "recsync.strategy.family": (),  # $RECSYNC_FAMILIES' modules: a user's, none of ours
}


def module_file(name: str, root: Path) -> Path | None:
    """The file of the dotted module `name` in the checkout at `root` (None: not one of its
    modules, e.g. a class or function imported from one)."""
    parts = name.split(".")
    for base in (root, root / "src"):
        for path in (
            base.joinpath(*parts).with_suffix(".py"),
            base.joinpath(*parts, "__init__.py"),
        ):
            if path.is_file():
                return path
    return None


def _imported(tree: ast.AST, name: str) -> Iterable[str]:
    """The dotted names `tree` (module `name`) imports: modules, or modules' attributes."""
    package = name.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package upward
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)
    yield from IMPORTED_BY_NAME.get(name, ())


def _with_parents(name: str) -> list[str]:
    """`a.b.c` -> a, a.b, a.b.c: importing a module runs its packages' __init__ first."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def closure(
    module: str, root: Path = ROOT, skip: Iterable[str] = (), within: Iterable[str] = PACKAGES
) -> list[Path]:
    """The files `module` runs, sorted; modules named in `skip` (dotted) and what only they
    import are left out, and only the top-level packages `within` are followed."""
    packages = tuple(within)
    skipped, seen, files = set(skip), set[str](), set[Path]()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or name in skipped:
            continue
        seen.add(name)
        path = module_file(name, root)
        if path is None:
            continue
        files.add(path)
        for imported in _imported(ast.parse(path.read_text()), name):
            if imported.split(".")[0] in packages:
                todo += _with_parents(imported)
    return sorted(files)
