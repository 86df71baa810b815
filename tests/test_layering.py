"""The functional core stays pure: no gRPC, no OpenTelemetry SDK, no protobuf.

The processor, receiver and audit are shells; the same core must run in all.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "otel_loopguard"
CORE = ("fingerprint", "policy", "progress", "detect", "findings/model.py", "score", "conventions", "enforce/guard.py", "calls.py", "bounded.py", "paths.py", "errors.py", "killswitch.py", "calibrate/sweep.py", "calibrate/replay.py", "calibrate/calibration.py", "render")
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
