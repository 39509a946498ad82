"""The test tree's layout: a test module never imports another test module. What tests share lives in a
conftest.py fixture or a plain helper module (tests/helpers.py, tests/app/catalog_hub.py, tests/fakehub.py...):
importing a test module runs its module-level code again and makes pytest collect nothing new but couple two
files that should change on their own."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _is_test_module(dotted: str) -> bool:
    return any(part.startswith("test_") for part in dotted.split("."))


def imported_test_modules(path: Path) -> list[str]:
    """The test modules ``path`` imports (``from tests.x.test_y import ...``, ``import tests.x.test_y``,
    ``from tests.x import test_y``, and the relative forms)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("tests.") and _is_test_module(a.name)]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and not (module == "tests" or module.startswith("tests.")):
                continue
            prefix = "." * node.level + module
            if _is_test_module(module):
                found.append(prefix)
            found += [f"{prefix}.{a.name}".replace("..", ".") for a in node.names if a.name.startswith("test_")]
    return found


def test_no_imported_test_modules_another():
    offenders = {}
    for path in sorted(TESTS.rglob("*.py")):
        imported = imported_test_modules(path)
        if imported:
            offenders[str(path.relative_to(TESTS.parent))] = imported
    assert offenders == {}, "move shared helpers to a conftest.py fixture or a helper module: " + repr(offenders)


def test_the_check_sees_every_form(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "from tests.app.test_main import run_livecap\n"
        "import tests.app.test_main\n"
        "from tests.app import test_main, fake_engine\n"
        "from .test_other import x\n"
        "from tests.helpers import run_livecap\n"
        "from tests.app import fake_engine\n"
        "from engine.test_like import y\n"
    )
    assert imported_test_modules(sample) == [
        "tests.app.test_main",
        "tests.app.test_main",
        "tests.app.test_main",
        ".test_other",
    ]
