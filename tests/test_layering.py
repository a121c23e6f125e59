"""The layering of the code, read from its import statements (nothing is imported or run).

The product is one package, ``softsplat_vfi``: softsplat <- model <- engine <- cli (the command line) / pipeline /
integrations (ComfyUI); outside it, evaluation (scoring) <- benchmarks, training <- train.py / bench / scripts, and
the published shims (run.py, softsplat.py, model/, the root __init__.py for ComfyUI) import only what they stand
for. Each component imports only those below it, and every component of the repository is named here; media (image
and video I/O) never imports the model or the engine; the package imports nothing from outside it, and inside it
only relatively (so that a ComfyUI clone loads it under its folder's name); nothing imports the command line or uses
a private name (``_x``) of another module of ours, imported or as an attribute (``module._x``); no module imports
itself back through others (no import circle); nothing edits ``sys.path`` or adds an import finder; no function of
the product code runs past about 120 lines.
"""

import ast
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "softsplat_vfi"
SKIP_DIRS = {".venv", ".git", "tests", "__pycache__"}
# the published shims at the top, by module name, and the component each is
SHIMS = {"run": "run shim", "softsplat": "softsplat shim", "model": "model shim", "__init__": "__init__"}
# what each component may import of ours (besides itself); the package's components are its subpackages and modules
ALLOWED = {
    "softsplat": set(),
    "model": {"softsplat"},
    "media": set(),
    "engine": {"softsplat", "model", "media"},
    "pipeline": {"media", "model"},
    "cli": {"engine", "media", "model", "pipeline"},
    "integrations": {"engine", "media", "model", "pipeline"},
    "package": {"engine"},  # softsplat_vfi/__init__.py: the library's names, loaded when first used
    # scoring sits above the engine, beside the command lines: it scores the engine (and peers) as users run it
    "evaluation": {"softsplat", "model", "media", "engine"},
    # the benchmarks sit on top: thin command lines over evaluation/
    "benchmark_middlebury": {"engine", "evaluation"},
    "benchmark_xiph": {"engine", "evaluation"},
    "training": {"softsplat", "model", "media", "engine", "evaluation"},
    "train": {"training"},
    "bench": {"softsplat", "model", "media", "engine", "pipeline", "evaluation", "training"},
    "scripts": {"softsplat", "model", "media", "engine", "evaluation", "training"},
    "images": set(),
    "run shim": {"cli"},
    "softsplat shim": {"softsplat"},
    "model shim": {"model"},
    "__init__": {"integrations"},  # ComfyUI's entry point when the repository is cloned into custom_nodes
}
INSIDE = {"softsplat", "model", "media", "engine", "pipeline", "cli", "integrations", "package"}
OUTSIDE = {"evaluation", "benchmark_middlebury", "benchmark_xiph", "training", "train", "bench", "scripts", "images"}
MAX_FUNCTION_LINES = 120


def _project_files(root: Path = ROOT) -> List[Path]:
    """The repository's own .py files: those git tracks (what ``pip install .`` leaves, build/ and *.egg-info, or
    any other file lying in the clone is not the project's); without git (an unpacked archive), every .py file
    outside such folders."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", "*.py"], capture_output=True,
                                check=True).stdout.decode().split("\0")
        return sorted(root / name for name in listed if name and (root / name).is_file())
    except (OSError, subprocess.CalledProcessError):
        return sorted(p for p in root.rglob("*.py") if not any(part == "build" or part.endswith(".egg-info")
                                                               for part in p.relative_to(root).parts))


def _product_files() -> List[Path]:
    return sorted(p for p in _project_files() if not SKIP_DIRS & set(p.relative_to(ROOT).parts))


def _component_of(parts: List[str]) -> str:
    """The component of a module, given its dotted name's parts."""
    if parts[0] == PACKAGE:
        return "package" if len(parts) == 1 or parts[1] == "__init__" else parts[1]
    if (len(parts) == 1 and parts[0] in SHIMS) or parts[0] == "model":
        return SHIMS[parts[0]]
    return parts[0]


def _component(path: Path) -> str:
    return _component_of(list(path.relative_to(ROOT).with_suffix("").parts))


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
    """The component of ours that ``module`` is in, or "" for another project's."""
    if not module:
        return ""
    component = _component_of(module.split("."))
    return component if component in ALLOWED and component != "__init__" else ""


def _is_module(dotted: str, root: Path = ROOT) -> bool:
    """Whether ``dotted`` names a module file or package of ours under ``root``."""
    candidate = root.joinpath(*dotted.split("."))
    return candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file()


def _imported(module: str, names: List[str]) -> List[str]:
    """The modules an import takes: ``from softsplat_vfi import softsplat`` (or ``from .. import softsplat``) takes
    the module ``softsplat_vfi.softsplat``, not the package's ``__init__``."""
    return [f"{module}.{name}" for name in names if _is_module(f"{module}.{name}")] or [module]


def test_the_walk_finds_the_layers():
    """The checks below see the files they are about (a wrong root would pass them vacuously), and every component
    of the repository has its allowed imports named: a new folder or top-level module must be placed in a layer."""
    seen = {_component(p) for p in _product_files()}
    assert {"softsplat", "model", "engine", "media", "pipeline", "cli", "bench", "training", "scripts"} <= seen
    assert seen == set(ALLOWED) == INSIDE | OUTSIDE | set(SHIMS.values()), \
        f"place these in ALLOWED: {sorted(seen ^ set(ALLOWED))}"


def test_the_package_imports_only_itself_and_only_relatively():
    """Inside ``softsplat_vfi`` every import of ours is relative: a clone in ComfyUI/custom_nodes/ loads the package
    as ``<folder>.softsplat_vfi``, beside other node packs' top-level ``model`` or ``engine``, and an absolute import
    would take theirs (or a second copy of ours). Outside it, code imports the package by its name."""
    wrong = []
    for path in _product_files():
        inside = path.relative_to(ROOT).parts[0] == PACKAGE
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            absolute = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                        [node.module] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for module in absolute:
                if inside and _ours(module):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {module} absolutely")
            if not inside and isinstance(node, ast.ImportFrom) and node.level and _component(path) in OUTSIDE:
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} reaches the package relatively")
    assert not wrong, "\n".join(wrong)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_walk_reads_the_projects_files_not_what_lies_in_the_folder(tmp_path):
    """``pip install .`` leaves build/lib/... and *.egg-info in the clone: the walk took build/ for a component of
    ours and test_the_walk_finds_the_layers failed. It reads the files git tracks, or without git skips those."""
    for name in ("model/net.py", "build/lib/model/net.py", "softsplat_vfi.egg-info/x.py", "scratch.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert [p.relative_to(tmp_path).as_posix() for p in _project_files(tmp_path)] == ["model/net.py", "scratch.py"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "model/net.py"], check=True)
    assert [p.relative_to(tmp_path).as_posix() for p in _project_files(tmp_path)] == ["model/net.py"]


@pytest.mark.parametrize("component", sorted(ALLOWED))
def test_each_layer_imports_only_the_layers_below_it(component):
    wrong = []
    for path in _product_files():
        if _component(path) != component:
            continue
        for line, module, names in _imports(path):
            for taken in _imported(module, names):
                target = _ours(taken)
                if target and target != component and target not in ALLOWED[component]:
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {taken}")
    assert not wrong, "\n".join(wrong)


def test_nothing_imports_the_cli_or_private_names_of_other_modules():
    wrong = []
    for path in _product_files():
        this = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for line, module, names in _imports(path):
            if _ours(module) in ("cli", "run shim") and _component(path) != "run shim":
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module} (the CLI): use the engine")
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if _ours(module) and private and module != this:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {', '.join(private)} from {module}")
    assert not wrong, "\n".join(wrong)


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_bindings(path: Path, tree: ast.AST, root: Path = ROOT) -> Dict[str, str]:
    """Local name -> module of ours, for each import that binds a module (``import softsplat``, ``import a.b as c``,
    ``from model import network``, ``from . import flow``)."""
    package = list(path.relative_to(root).parent.parts)
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name):
                    bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                        alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level > 1 else package if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            if not _ours(module):
                continue
            for alias in node.names:
                if _is_module(f"{module}.{alias.name}", root):
                    bound[alias.asname or alias.name] = f"{module}.{alias.name}"
    return bound


def _private_attributes(path: Path, root: Path = ROOT) -> List[str]:
    """``module._name`` uses in ``path`` where ``module`` is another module of ours."""
    tree = ast.parse(path.read_text(), str(path))
    bound, this = _module_bindings(path, tree, root), _module_name(path, root)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in bound and bound[node.value.id] != this):
            found.append(f"{path.relative_to(root)}:{node.lineno} uses {bound[node.value.id]}.{node.attr}")
    return found


def test_no_module_uses_private_attributes_of_another():
    """``softsplat._launch`` from model/correlation.py was such a use: what another module needs gets a public
    name."""
    wrong = [line for path in _product_files() for line in _private_attributes(path)]
    assert not wrong, "\n".join(wrong)


def _import_graph(files: List[Path]) -> Dict[str, Set[str]]:
    """Module -> the modules of ours it imports, anywhere in it (function-local imports too: they close circles
    just the same, later); ``from package import module`` counts as importing the module."""
    names = {_module_name(p): p for p in files}
    graph: Dict[str, Set[str]] = defaultdict(set)
    for name, path in names.items():
        for _, module, imported in _imports(path):
            if not _ours(module):
                continue
            targets = [f"{module}.{n}" for n in imported if f"{module}.{n}" in names] or [module]
            graph[name].update(t for t in targets if t in names and t != name)
    return graph


def _find_circle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One import circle of ``graph`` (its modules in order, the first repeated at the end), or None."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_there_is_no_import_circle():
    """model/published.py <-> model/weights.py (in softsplat_vfi/) and training/config.py <-> training/holdout.py
    were circles."""
    graph = _import_graph(_product_files())
    assert graph[f"{PACKAGE}.model.weights"] and graph["training.holdout"]  # the walk sees the imports
    circle = _find_circle(graph)
    assert circle is None, " -> ".join(circle)


def test_the_circle_and_attribute_checks_catch_a_violation(tmp_path):
    assert _find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_circle({"a": {"b"}, "b": {"c"}, "d": {"a", "c"}}) is None
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "flow.py").write_text("")
    bad = tmp_path / "model" / "probe.py"
    bad.write_text("import softsplat\nfrom model import flow\nx = softsplat._launch\ny = flow._private\n"
                   "z = softsplat.splat\n")
    assert [line.split(" uses ")[1] for line in _private_attributes(bad, tmp_path)] == ["softsplat._launch",
                                                                                     "model.flow._private"]


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


def test_nothing_adds_an_import_finder():
    """The ComfyUI pack had a finder for the library's top-level packages, and a guard against other packs' modules of
    the same names; with one package, imported relatively inside, neither is needed."""
    users = [str(p.relative_to(ROOT)) for p in _product_files() if "meta_path" in p.read_text()]
    assert users == []


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
    assert (f"{PACKAGE}/cli.py", "main") in lengths
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
    used: Set[str] = {_ours(m) for _, m, _ in _imports(ROOT / PACKAGE / "cli.py")} - {""}
    assert "engine" in used and used <= ALLOWED["cli"]
    assert _ours("softsplat_vfi.engine.options") == "engine" and _ours("model.network") == "model shim"
    assert _ours("torch") == "" and _component(ROOT / "softsplat.py") == "softsplat shim"
