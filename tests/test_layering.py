"""The layering of the code, read from its import statements (nothing is imported or run).

softsplat <- model <- engine <- run.py (CLI) / pipeline / benchmarks: each layer imports only those below it;
media (image and video I/O) never imports the model or the engine; no module imports run.py, or a private name
(``_x``) from another module of ours; nothing edits ``sys.path`` (only the ComfyUI pack adds a finder for the
library's packages); no function of the product code runs past about 120 lines.
"""

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".venv", ".git", "tests", "__pycache__"}
# the components of the repository, by the first part of their module name
OURS = {"softsplat", "model", "engine", "media", "pipeline", "training", "train", "run", "benchmark_middlebury",
        "benchmark_xiph", "bench", "scripts", "images"}
# what each layer may import of ours (besides itself); components not named here are checked by the general rules
ALLOWED = {
    "softsplat": set(),
    "model": {"softsplat"},
    "media": set(),
    "engine": {"softsplat", "model", "media"},
    "pipeline": {"media", "model"},
    "run": {"engine", "media", "model", "pipeline"},
    "benchmark_middlebury": {"engine", "media", "model"},
    "benchmark_xiph": {"engine", "media", "model"},
}
MAX_FUNCTION_LINES = 120


def _product_files() -> List[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if not SKIP_DIRS & set(p.relative_to(ROOT).parts))


def _component(path: Path) -> str:
    return path.relative_to(ROOT).parts[0].removesuffix(".py")


def _imports(path: Path) -> Iterator[Tuple[int, str, List[str]]]:
    """(line, absolute module name, imported names) for each import of ``path``; relative imports resolved."""
    package = list(path.relative_to(ROOT).parent.parts) if path.is_relative_to(ROOT) else []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1] if node.level > 1 else package
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module, [alias.name for alias in node.names]


def _ours(module: str) -> str:
    top = module.split(".")[0]
    return top if top in OURS else ""


def test_the_walk_finds_the_layers():
    """The checks below see the files they are about (a wrong root would pass them vacuously)."""
    seen = {_component(p) for p in _product_files()}
    assert {"softsplat", "model", "engine", "media", "pipeline", "run", "bench"} <= seen


@pytest.mark.parametrize("component", sorted(ALLOWED))
def test_each_layer_imports_only_the_layers_below_it(component):
    wrong = []
    for path in _product_files():
        if _component(path) != component:
            continue
        for line, module, _ in _imports(path):
            target = _ours(module)
            if target and target != component and target not in ALLOWED[component]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_nothing_imports_the_cli_or_private_names_of_other_modules():
    wrong = []
    for path in _product_files():
        this = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for line, module, names in _imports(path):
            if _ours(module) == "run" and this != "run":
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports run.py (the CLI): use the engine")
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if _ours(module) and private and module != this:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {', '.join(private)} from {module}")
    assert not wrong, "\n".join(wrong)


def _edits_sys_path(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
                and node.value.id == "sys"):
            return True
    return False


def test_no_file_edits_sys_path():
    """The repository root reaches the import path through ``python -m`` or pytest.ini's ``pythonpath``."""
    files = _product_files() + sorted((ROOT / "tests").glob("*.py"))
    offenders = [str(p.relative_to(ROOT)) for p in files
                 if _edits_sys_path(ast.parse(p.read_text()))]
    assert not offenders, offenders


def test_only_the_comfyui_pack_adds_an_import_finder():
    """ComfyUI imports custom nodes by file location and puts no folder of theirs on the import path: the node pack
    adds a finder for the library's own packages (and no other name) when a node first runs; nothing else may."""
    users = [str(p.relative_to(ROOT)) for p in _product_files() if "meta_path" in p.read_text()]
    assert users == ["integrations/comfyui/nodes.py"]


def _function_lengths() -> Dict[Tuple[str, str], int]:
    lengths = {}
    for path in _product_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = (str(path.relative_to(ROOT)), node.name)
                lengths[key] = max(lengths.get(key, 0), node.end_lineno - node.lineno + 1)
    return lengths


def test_no_function_runs_past_120_lines():
    lengths = _function_lengths()
    assert ("run.py", "main") in lengths
    long = {key: n for key, n in lengths.items() if n > MAX_FUNCTION_LINES}
    assert not long, long


def test_the_layer_checks_catch_a_violation(tmp_path):
    """The checks themselves: a media module importing the model, a sys.path edit, a private import."""
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nsys.path.insert(0, '.')\nfrom model.inference import _run\n")
    assert _edits_sys_path(ast.parse(bad.read_text()))
    (module, names), = [(m, n) for _, m, n in _imports(bad) if _ours(m)]
    assert module == "model.inference" and names == ["_run"]
    assert "model" not in ALLOWED["media"]
    used: Set[str] = {_ours(m) for _, m, _ in _imports(ROOT / "run.py")} - {""}
    assert "engine" in used and used <= ALLOWED["run"]
