"""The package's layout: the maps cannot drift from the code, and the engine stays below.

* README's layout and the engine's module map name every module (a new one
  fails here until a map says what it owns);
* the engine (``skl_nw/_engine/``) imports nothing of the package above it
  but the kernel records (data), and the modules above it use the names it
  exports (``from ._engine import ...``), never its private modules;
* no module is much over 500 lines.
"""

import ast
import fnmatch
import re
from pathlib import Path

import pytest

import skl_nw

PACKAGE = Path(skl_nw.__file__).parent
README = PACKAGE.parent / "README.md"
MODULES = sorted(p.relative_to(PACKAGE.parent).as_posix() for p in PACKAGE.rglob("*.py"))
# What the engine may import from the package above it: kernels are data.
ENGINE_MAY_IMPORT = {"skl_nw._kernels"}
MAX_LINES = 520


def _imports(path: Path) -> list[str]:
    """Absolute names of the package's modules that ``path`` imports."""
    package = ".".join(path.relative_to(PACKAGE.parent).parts[:-1])
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            names.append(".".join(base + ([node.module] if node.module else [])))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("skl_nw"):
            names.append(node.module)
    return names


@pytest.mark.skipif(not README.exists(), reason="README.md is beside the sources only")
def test_readme_layout_names_every_module():
    text = README.read_text()
    layout = text[text.index("## Layout") :]
    patterns = set(re.findall(r"skl_nw/[\w*./]+", layout))
    names = set(re.findall(r"\b(_[\w*]+\.py)\b", layout))
    engine = "skl_nw/_engine/"
    missing = []
    for module in MODULES:
        name = module.rsplit("/", 1)[1]
        listed = any(fnmatch.fnmatch(module, p) for p in patterns) or any(
            fnmatch.fnmatch(name, n) for n in names
        )
        if module.startswith(engine) and not module.endswith("__init__.py"):
            listed = any(fnmatch.fnmatch(name, n) for n in names)
        if not listed and not module.endswith("__init__.py"):
            missing.append(module)
    assert missing == [], f"README's layout does not name {missing}"


def test_engine_module_map_names_every_engine_module():
    doc = (PACKAGE / "_engine" / "__init__.py").read_text()
    doc = ast.get_docstring(ast.parse(doc))
    mapped = set(re.findall(r"``(_\w+)``", doc))
    modules = {p.stem for p in (PACKAGE / "_engine").glob("_*.py") if p.stem != "__init__"}
    assert modules - mapped == set(), "the engine's module map misses them"
    assert mapped - modules == set(), "the engine's module map names modules that are gone"


@pytest.mark.parametrize("module", [m for m in MODULES if m.startswith("skl_nw/_engine/")])
def test_engine_imports_nothing_above_it(module):
    upward = [
        name
        for name in _imports(PACKAGE.parent / module)
        if not name.startswith("skl_nw._engine") and name not in ENGINE_MAY_IMPORT
    ]
    assert upward == [], f"{module} imports {upward} from above the engine"


@pytest.mark.parametrize("module", [m for m in MODULES if not m.startswith("skl_nw/_engine/")])
def test_callers_use_the_engine_exported_names(module):
    private = [n for n in _imports(PACKAGE.parent / module) if n.startswith("skl_nw._engine._")]
    assert private == [], f"{module} reaches into {private}; import them from skl_nw._engine"


@pytest.mark.parametrize("module", MODULES)
def test_modules_stay_small(module):
    lines = len((PACKAGE.parent / module).read_text().splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines"


TESTS = Path(__file__).resolve().parents[1]
# The test folders mirror the package: its engine, smoothers, inference and search,
# and api/ for what spans them (estimator checks, the conformance matrix, packaging).
TEST_FOLDERS = {"engine", "smoothers", "inference", "search", "api"}


@pytest.mark.skipif(not (TESTS / "conftest.py").exists(), reason="beside the tests only")
def test_tests_mirror_the_package():
    files = {p.relative_to(TESTS).parts for p in TESTS.rglob("test_*.py")}
    misplaced = sorted("/".join(parts) for parts in files if parts[0] not in TEST_FOLDERS)
    assert misplaced == [], f"test files outside {sorted(TEST_FOLDERS)}: {misplaced}"
    packages = {p.parent.name.lstrip("_") for p in PACKAGE.glob("_*/__init__.py")}
    assert packages <= TEST_FOLDERS, "a subpackage without its test folder"
