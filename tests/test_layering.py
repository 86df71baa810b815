"""The functional core stays pure: no gRPC, no OpenTelemetry SDK, no protobuf.

The processor, receiver and audit are shells; the same core must run in all.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "otel_loopguard"
CORE = ("fingerprint", "policy", "progress", "detect", "findings/model.py", "score", "conventions", "enforce/guard.py", "calls.py", "bounded.py", "paths.py", "errors.py", "killswitch.py", "policy_source.py", "watched.py", "version.py", "calibrate/sweep.py", "calibrate/replay.py", "calibrate/calibration.py", "render")
FORBIDDEN = ("grpc", "opentelemetry", "google.protobuf")


def _core_files() -> list[Path]:
    files: list[Path] = []
    for entry in CORE:
        path = PACKAGE / entry
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_imports_nothing_from_grpc_or_the_sdk(path: Path) -> None:
    bad = [n for n in _imports(path) if any(n == f or n.startswith(f + ".") for f in FORBIDDEN)]
    assert bad == [], f"{path.name} imports {bad}"


def test_core_list_is_not_empty_and_covers_detectors() -> None:
    names = {p.name for p in _core_files()}
    assert {"repeat.py", "cycle.py", "canonical.py", "integrity.py", "recognise.py"} <= names


@pytest.mark.parametrize("path", [*_core_files(), PACKAGE / "findings" / "otlp.py"], ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_does_not_import_the_package_root(path: Path) -> None:
    """The root pulls in the install and guard entry points: the core needs none of them (the
    version comes from version.py, a leaf)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    depth = len(path.relative_to(PACKAGE).parts) - 1  # dots that lead back to the package root
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert not (node.level == depth + 1 and node.module is None), f"{path.name}: from {'.' * node.level} import"
            assert node.module != "otel_loopguard" or node.level, f"{path.name}: from otel_loopguard import"
        elif isinstance(node, ast.Import):
            assert "otel_loopguard" not in [a.name for a in node.names], f"{path.name}: import otel_loopguard"


def test_the_version_module_says_what_pyproject_says() -> None:
    import tomllib

    from otel_loopguard.version import __version__

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert __version__ == project["version"]
