"""No function of the package runs over 60 lines (docstring included): a longer one is split
into steps a reader can name. Checked here so that it holds without anyone counting."""

from __future__ import annotations

import ast
from pathlib import Path

import safeuninstall

LIMIT = 60


def test_no_function_runs_over_sixty_lines() -> None:
    root = Path(safeuninstall.__file__).parent
    long = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                size = node.end_lineno - node.lineno + 1
                if size > LIMIT:
                    long.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({size})")
    assert not long, long
