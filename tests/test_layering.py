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


# -- the canonical form sits below the policy ----------------------------------------------------
_BELOW_POLICY = ("fingerprint/canonical.py", "fingerprint/keys.py", "fingerprint/native.py")


def _relative_imports(path: Path) -> list[tuple[int, str]]:
    """(level, module) of each relative import, wherever it sits (`from . import x`: x)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.level, n.module or a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level
            for a in (n.names if n.module is None else n.names[:1])]


@pytest.mark.parametrize("name", _BELOW_POLICY)
def test_the_modules_below_the_policy_import_nothing_above_it(name: str) -> None:
    """canonical.py imports no module of the package; keys.py and native.py only each other,
    canonical.py and errors.py."""
    allowed = {(1, "canonical"), (1, "native"), (2, "errors")}
    imports = _relative_imports(PACKAGE / name)
    assert [i for i in imports if i not in allowed] == [], name
    if name.endswith("canonical.py"):
        assert imports == []


def test_importing_the_canonical_form_imports_no_policy() -> None:
    import subprocess
    import sys

    code = ("import sys, otel_loopguard.fingerprint.canonical\n"
            "print(sorted(m for m in sys.modules if m.startswith(('otel_loopguard.policy', "
            "'otel_loopguard.progress', 'otel_loopguard.fingerprint.fingerprinter'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_policy_imports_the_canonical_form_at_the_top_not_late() -> None:
    """No function-level import of fingerprint/ in policy/: a late import there meant the
    canonical form sat above the policy."""
    for path in sorted((PACKAGE / "policy").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(n) for n in tree.body}
        late = [n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in top
                and "fingerprint" in (getattr(n, "module", None) or "")]
        assert late == [], f"{path.name}: {late}"
    assert (2, "fingerprint.canonical") in _relative_imports(PACKAGE / "policy" / "load.py")


def test_the_package_names_of_fingerprint_resolve_in_any_import_order() -> None:
    import subprocess
    import sys

    for first in ("otel_loopguard.policy", "otel_loopguard.fingerprint.canonical", "otel_loopguard.progress"):
        code = (f"import {first}\nfrom otel_loopguard.fingerprint import *\n"
                "from otel_loopguard.fingerprint import Fingerprinter, fingerprint_call, fingerprint_finished\n")
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- no core module reads a private field of another library -------------------------------------
# The json module's undocumented internals (the C scanner and encoder factory) and the private
# fields of any imported library. processor/sdk_shape.py, a shell, owns the SDK's.
_JSON_INTERNALS = ("scan_once", "c_make_encoder", "c_scanstring", "encode_basestring", "py_encode_basestring",
                   "json.encoder", "json.decoder", "json.scanner", "_one_shot", "make_scanner")


def _foreign_private_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    foreign = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    foreign |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level
                for a in n.names}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in foreign:
                out.append(f"{node.lineno}: .{node.attr}")
    source = path.read_text(encoding="utf-8")
    out += [name for name in _JSON_INTERNALS if name in source]
    return out


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_reads_no_private_field_of_another_library(path: Path) -> None:
    assert _foreign_private_reads(path) == []


def test_the_private_field_scan_sees_one(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import json\nfrom orjson import x\nscan = json.decoder.JSONDecoder().scan_once\n"
                     "y = x._private\nz = _own._fine\n", encoding="utf-8")
    assert _foreign_private_reads(probe) == ["4: ._private", "scan_once", "json.decoder"]
