"""Every import is declared in pyproject.toml, in the right place; the layers hold.

Read from the source with ``ast`` (nothing is imported):

- each third-party module the product (services/tribunal) or the lab (lab/) imports maps
  to a distribution declared in the runtime or in the extra that feature needs;
- importing any product module pulls in only runtime dependencies, except the few
  adapters that exist for an extra (the review web app, vote aggregation);
- the product never imports the lab, and its subpackages import each other without a
  cycle.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from tribunal.cli import main

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ROOT / "services" / "tribunal"
LAB = ROOT / "lab"

# Top-level module -> the distributions that provide it (any one declared is enough).
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "Stemmer": ("PyStemmer",),
    "alembic": ("alembic",),
    "annotated_types": ("annotated-types",),
    "bm25s": ("bm25s",),
    "crowdkit": ("crowd-kit",),
    "cryptography": ("cryptography",),
    "datasets": ("datasets",),
    "faiss": ("faiss-cpu", "faiss-gpu-cu12"),
    "filelock": ("filelock",),
    "gguf": ("gguf",),
    "google.protobuf": ("protobuf",),
    "google.rpc": ("googleapis-common-protos",),
    "grpc": ("grpcio",),
    "grpc_health": ("grpcio-health-checking",),
    "grpc_reflection": ("grpcio-reflection",),
    "grpc_status": ("grpcio-status",),
    "grpc_tools": ("grpcio-tools",),
    "helm_python": ("helm-python-sdk",),
    "ir_measures": ("ir-measures",),
    "ppi_py": ("ppi-python",),
    "jsonschema": ("jsonschema",),
    "krippendorff": ("krippendorff",),
    "kubernetes": ("kubernetes",),
    "kubernetes_validate": ("kubernetes-validate",),
    "llama_cpp": ("llama-cpp-python",),
    "matplotlib": ("matplotlib",),
    "numpy": ("numpy",),
    "pandas": ("pandas",),
    "prometheus_client": ("prometheus-client",),
    "psutil": ("psutil",),
    "pydantic": ("pydantic",),
    "pydantic_settings": ("pydantic-settings",),
    "rapidfuzz": ("rapidfuzz",),
    "ray": ("ray",),
    "requests": ("requests",),
    "scipy": ("scipy",),
    "sentence_transformers": ("sentence-transformers",),
    "sklearn": ("scikit-learn",),
    "sqlalchemy": ("SQLAlchemy",),
    "starlette": ("starlette",),
    "statsmodels": ("statsmodels",),
    "torch": ("torch",),
    "tqdm": ("tqdm",),
    "transformers": ("transformers",),
    "urllib3": ("urllib3",),
    "uvicorn": ("uvicorn",),
    "yaml": ("PyYAML",),
}

# Runtime distributions no module imports by name, and why they are needed.
USED_INDIRECTLY = {
    "accelerate": "transformers loads GGUF weights and device maps through it",
    "psycopg": "SQLAlchemy's postgresql+psycopg driver",
}

# Product modules that exist for an extra: importing them needs it (callers import them
# lazily, after checking the extra is installed). Everything else imports on the runtime.
ADAPTERS = {
    "tribunal.jobs._review_web": "review",
    "tribunal.jobs._aggregate": "analysis",
}

# Every install takes exactly one of these (the FAISS build): part of the runtime here.
ONE_OF = ("cpu", "gpu")
# What product code may import beyond the runtime, inside a function.
PRODUCT_EXTRAS = {"llamacpp", "review", "k8s", "analysis", "tune"}
# The protobuf generator runs from `make protos` only.
DEV_ONLY = {"tribunal.protogen": {"grpc_tools"}}
# The lab may use its extra and the llama.cpp backend (built from source, not forced on it).
LAB_EXTRAS = {"lab", "llamacpp"}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    """Runtime distributions (with the FAISS build every install picks, ``cpu`` or
    ``gpu``) and each extra's (self-references like ``tribunal[x]`` expanded)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    raw = project["optional-dependencies"]
    runtime = {_normalise(Requirement(r).name) for r in project["dependencies"]}
    runtime |= {_normalise(Requirement(r).name) for e in ONE_OF if e in raw for r in raw[e]}

    def expand(extra: str, seen: frozenset[str] = frozenset()) -> set[str]:
        names: set[str] = set()
        for line in raw[extra]:
            requirement = Requirement(line)
            if _normalise(requirement.name) == "tribunal":
                for inner in requirement.extras - seen:
                    names |= expand(inner, seen | {extra})
            else:
                names.add(_normalise(requirement.name))
        return names

    return runtime, {extra: expand(extra) for extra in raw}


@dataclass(frozen=True)
class Imported:
    """One import statement's target, where it is and whether it runs at import time."""

    target: str
    """Absolute dotted name (relative imports resolved)."""
    names: tuple[str, ...]
    """For ``from X import a, b``: a, b (each may be a submodule of X)."""
    module_level: bool
    """Executed when the importing module is imported (not in a function, not only for
    type checkers)."""
    line: int


def _module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, module: str) -> Iterator[Imported]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST, module_level: bool) -> Iterator[Imported]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Imported(alias.name, (), module_level, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = tuple(a.name for a in node.names)
            yield Imported(target, names, module_level, node.lineno)
        for child in ast.iter_child_nodes(node):
            lazy = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) or (
                isinstance(child, ast.If) and _is_type_checking(child)
            )
            yield from visit(child, module_level and not lazy)

    yield from visit(ast.parse(path.read_text(encoding="utf-8")), True)


def _sources(base: Path, folder: Path) -> dict[str, Path]:
    return {
        _module_name(path, base): path
        for path in sorted(folder.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _third_party(target: str) -> str | None:
    """The key of DISTRIBUTIONS a third-party import is found under; None when internal
    or standard library."""
    top = target.split(".", maxsplit=1)[0]
    if top in ("tribunal", "tribunal_lab", "__future__", "tests") or top in sys.stdlib_module_names:
        return None
    if top == "google":
        return ".".join(target.split(".")[:2])
    return top


PRODUCT_MODULES = _sources(ROOT / "services", PRODUCT)
# The lab package, and its scripts (each a top-level module).
EXPERIMENTS = LAB / "experiments"
LAB_MODULES = _sources(LAB, LAB / "tribunal_lab") | _sources(EXPERIMENTS, EXPERIMENTS)


def _distributions_of(key: str, where: str) -> set[str]:
    if key not in DISTRIBUTIONS:
        pytest.fail(
            f"{where} imports {key!r}, which this test cannot map to a distribution: "
            "declare it in pyproject.toml and add it to DISTRIBUTIONS"
        )
    return {_normalise(d) for d in DISTRIBUTIONS[key]}


def test_every_product_import_is_declared_at_runtime_or_in_its_extra() -> None:
    runtime, extras = _declared()
    optional = set().union(*(extras[e] for e in PRODUCT_EXTRAS if e in extras))
    problems = []
    for module, path in PRODUCT_MODULES.items():
        for item in _imports(path, module):
            key = _third_party(item.target)
            if key is None:
                continue
            where = f"{path.relative_to(ROOT)}:{item.line}"
            provided = _distributions_of(key, where)
            if key in DEV_ONLY.get(module, set()):
                allowed = extras["dev"]
            elif item.module_level and module not in ADAPTERS:
                allowed = runtime
            else:
                allowed = runtime | optional
            if not provided & allowed:
                problems.append(f"{where}: {key} ({' or '.join(sorted(provided))})")
    assert not problems, "undeclared, or optional but imported at import time:\n" + "\n".join(
        problems
    )


def test_every_lab_import_is_declared() -> None:
    runtime, extras = _declared()
    allowed = runtime.union(*(extras[e] for e in LAB_EXTRAS))
    problems = [
        f"{path.relative_to(ROOT)}:{item.line}: {key}"
        for module, path in LAB_MODULES.items()
        for item in _imports(path, module)
        if (key := _third_party(item.target)) is not None
        and not _distributions_of(key, str(path)) & allowed
    ]
    assert not problems, "not in the runtime or the lab extra:\n" + "\n".join(problems)


def test_every_runtime_dependency_is_used() -> None:
    runtime, _ = _declared()
    imported = {
        _normalise(d)
        for module, path in PRODUCT_MODULES.items()
        for item in _imports(path, module)
        if (key := _third_party(item.target)) in DISTRIBUTIONS
        for d in DISTRIBUTIONS[key]
    }
    unused = runtime - imported - set(USED_INDIRECTLY)
    assert not unused, f"runtime dependencies nothing imports: {sorted(unused)}"


@functools.cache
def _module_level_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per product module: the product modules and the third-party keys importing it
    executes directly (parent packages included)."""
    graph: dict[str, set[str]] = {}
    third: dict[str, set[str]] = {}
    for module, path in PRODUCT_MODULES.items():
        parents = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
        graph[module] = set(parents)
        third[module] = set()
        for item in _imports(path, module):
            if not item.module_level:
                continue
            key = _third_party(item.target)
            if key is not None:
                third[module].add(key)
                continue
            if not item.target.startswith("tribunal."):
                continue
            for name in (item.target, *(f"{item.target}.{n}" for n in item.names)):
                if name in PRODUCT_MODULES:
                    graph[module].add(name)
                    parts = name.split(".")
                    graph[module] |= {".".join(parts[:i]) for i in range(1, len(parts))}
    return graph, third


def _module_level_closure(start: str) -> tuple[set[str], set[str]]:
    """Product modules and third-party keys executed by importing ``start``."""
    graph, third = _module_level_graph()
    seen: set[str] = set()
    stack = [start]
    while stack:
        module = stack.pop()
        if module in seen or module not in graph:
            continue
        seen.add(module)
        stack.extend(graph[module])
    return seen, set().union(*(third[m] for m in seen))


def test_importing_a_product_module_needs_only_the_runtime() -> None:
    runtime, _ = _declared()
    problems = []
    for module in PRODUCT_MODULES:
        if module in ADAPTERS or module in DEV_ONLY:
            continue
        reached, keys = _module_level_closure(module)
        needs = {k for k in keys if not _distributions_of(k, module) & runtime}
        if needs:
            adapters = sorted(reached & set(ADAPTERS))
            problems.append(f"import {module} needs {sorted(needs)} (through {adapters})")
    assert not problems, "\n".join(problems)


def test_the_adapters_are_what_needs_their_extra() -> None:
    _, extras = _declared()
    for module, extra in ADAPTERS.items():
        _, keys = _module_level_closure(module)
        optional = {k for k in keys if _distributions_of(k, module) & extras[extra]}
        assert optional, f"{module} imports nothing from the {extra!r} extra: drop it from ADAPTERS"


def test_the_product_never_imports_the_lab() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{item.line}"
        for module, path in PRODUCT_MODULES.items()
        for item in _imports(path, module)
        if item.target.split(".")[0] == "tribunal_lab"
    ]
    assert not found, f"the product imports tribunal_lab at {found}"


def _subpackage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "tribunal"


def test_no_import_cycle_between_product_subpackages() -> None:
    """Every import counts here, also those inside functions or for type checkers: a
    cycle between two areas is a layering problem even when Python can resolve it."""
    edges: dict[str, dict[str, str]] = {}
    for module, path in PRODUCT_MODULES.items():
        for item in _imports(path, module):
            if item.target.split(".")[0] != "tribunal":
                continue
            source, target = _subpackage(module), _subpackage(item.target)
            # `from tribunal import __version__` reads the root package, not an area.
            if target in ("tribunal", source):
                continue
            edges.setdefault(source, {}).setdefault(target, f"{path.relative_to(ROOT)}:{item.line}")

    done: set[str] = set()

    def cycle_from(node: str, trail: list[str]) -> list[str] | None:
        """Depth first; a node already explored without a cycle is not explored again."""
        for nxt in sorted(edges.get(node, {})):
            if nxt in trail:
                return [*trail[trail.index(nxt) :], nxt]
            if nxt not in done and (found := cycle_from(nxt, [*trail, nxt])):
                return found
        done.add(node)
        return None

    for start in sorted(edges):
        cycle = cycle_from(start, [start])
        if cycle:
            steps = [f"{a} -> {b} ({edges[a][b]})" for a, b in itertools.pairwise(cycle)]
            pytest.fail("import cycle between subpackages:\n" + "\n".join(steps))


def test_a_command_whose_extra_is_missing_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "krippendorff" else real(name, *args),
    )
    votes = tmp_path / "votes.jsonl"
    votes.write_text('{"task": "t", "worker": "w", "label": "a"}\n')
    assert main(["label", "aggregate", "--votes", str(votes), "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "tribunal label aggregate needs krippendorff" in error
    assert "pip install 'tribunal[analysis]'" in error
