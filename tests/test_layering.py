"""The functional core stays pure: no gRPC, no OpenTelemetry SDK, no protobuf.

The processor, receiver and audit are shells; the same core must run in all.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "otel_loopguard"
CORE = ("canon", "native.py", "fingerprint", "policy", "progress", "detect", "findings/model.py", "findings/waste.py", "findings/episodes.py", "findings/wording.py", "score", "conventions", "enforce/guard.py", "calls.py", "bounded.py", "paths.py", "errors.py", "killswitch.py", "policy_source.py", "watched.py", "version.py", "calibrate/sweep.py", "calibrate/replay.py", "calibrate/calibration.py", "render")
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


# -- one ordered list of layers -------------------------------------------------------------------
# Bottom first. A unit (a module or a package, named from the package root; "" is the root's
# own __init__) may import from units of lower layers and from itself, never from a unit of its
# own layer or above: a back-arrow fails. Every module of the package belongs to one unit.
# Imports are counted wherever they stand (inside functions, under TYPE_CHECKING, relative or
# absolute): a late import that dodges a cycle is still an arrow.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("version", "errors", "calls", "bounded", "paths", "killswitch", "watched", "local_receivers", "native",
     "render"),
    ("canon", "mode"),
    ("policy", "conventions"),
    ("progress", "otlp"),
    ("findings",),
    ("detect", "fingerprint"),
    ("score", "policy_source"),
    ("processor",),
    ("enforce",),
    ("",),
    ("audit",),
    ("calibrate", "receiver"),
    ("demo", "mcp"),
    ("cli",),
)
# Packages whose own folders are layered too, bottom first (same rule, inside the package).
ROOMS: dict[str, tuple[tuple[str, ...], ...]] = {
    "receiver": (("config",), ("ops",), ("ingest",), ("runs",), ("state",), ("out",), ("front",), ("serve",)),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(package.rglob("*.py"))}


def _arrows(path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules this file imports (names relative to the package root)."""
    here = _module_name(path).split(".") if _module_name(path) else []
    package = here if path.name == "__init__.py" else here[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] + ([node.module] if node.module else [])
            elif node.module and (node.module + ".").startswith("otel_loopguard."):
                base = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:
                target = ".".join([*base, alias.name])
                out.add(target if target in known else ".".join(base))
        elif isinstance(node, ast.Import):
            out |= {".".join(a.name.split(".")[1:]) for a in node.names if (a.name + ".").startswith("otel_loopguard.")}
    return {t for t in out if t in known and t != _module_name(path)}


def _unit(module: str, units: list[str]) -> str | None:
    """The unit holding `module`: the longest unit name it is, or sits under ("" only itself)."""
    inside = [u for u in units if module == u or (u and module.startswith(u + "."))]
    return max(inside, key=len) if inside else None


def _back_arrows(modules: dict[str, Path], layers: tuple[tuple[str, ...], ...], prefix: str = "") -> list[str]:
    level = {f"{prefix}{u}" if u else prefix.rstrip("."): n for n, layer in enumerate(layers) for u in layer}
    units = list(level)
    bad = []
    for module, path in modules.items():
        mine = _unit(module, units)
        if mine is None:
            continue
        for target in _arrows(path, modules):
            theirs = _unit(target, units)
            if theirs is not None and theirs != mine and level[theirs] >= level[mine]:
                bad.append(f"{module} -> {target} ({mine or 'the root'} may not import {theirs or 'the root'})")
    return sorted(bad)


def test_every_module_belongs_to_a_layer() -> None:
    units = [u for layer in LAYERS for u in layer]
    assert len(units) == len(set(units))
    assert [m for m in _modules() if _unit(m, units) is None] == []
    for package, rooms in ROOMS.items():
        inner = [f"{package}.{u}" for layer in rooms for u in layer]
        lost = [m for m in _modules() if m.startswith(package + ".") and _unit(m, inner) is None]
        assert lost == [], f"{package}: modules in no room: {lost}"


def test_no_module_imports_from_its_own_layer_or_above() -> None:
    assert _back_arrows(_modules(), LAYERS) == []


@pytest.mark.parametrize("package", sorted(ROOMS))
def test_no_room_imports_from_its_own_layer_or_above(package: str) -> None:
    inside = {m: p for m, p in _modules().items() if m.startswith(package + ".")}
    assert _back_arrows(inside, ROOMS[package], prefix=package + ".") == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_cycle_anywhere() -> None:
    modules = _modules()
    graph = {m: {t for t in _arrows(p, modules) if t != ""} for m, p in modules.items()}
    assert _cycles(graph) == []


def test_the_layer_checks_see_a_back_arrow_and_a_cycle(tmp_path: Path) -> None:
    """Negative control: a relative import from the core up into the receiver, and two modules
    that import each other, are both caught."""
    package = tmp_path / "otel_loopguard"
    for name, text in {"__init__.py": "", "detect/__init__.py": "", "receiver/__init__.py": "",
                       "detect/run.py": "from ..receiver import server\n",
                       "receiver/server.py": "from . import dedupe\n", "receiver/dedupe.py": "from .server import x\n"}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    global PACKAGE
    saved, PACKAGE = PACKAGE, package
    try:
        modules = _modules(package)
        assert _back_arrows(modules, (("detect",), ("receiver",))) == [
            "detect.run -> receiver.server (detect may not import receiver)"]
        graph = {m: {t for t in _arrows(p, modules) if t != ""} for m, p in modules.items()}
        assert _cycles(graph) == [["receiver.dedupe", "receiver.server"]]
    finally:
        PACKAGE = saved


@pytest.mark.real  # starts a process
def test_the_canonical_form_imports_no_policy() -> None:
    """The canonical form is the bottom of the pipeline: loading it loads no policy, progress or
    fingerprinter (policy/load.py hashes its own content with it)."""
    import subprocess
    import sys

    code = ("import sys, otel_loopguard.canon.canonical\n"
            "print(sorted(m for m in sys.modules if m.startswith(('otel_loopguard.policy', "
            "'otel_loopguard.progress', 'otel_loopguard.fingerprint'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


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


def test_no_room_of_the_receiver_holds_more_than_eight_modules() -> None:
    """A room a reader can take in at once (issue 25): split one that grows past it. (detect/,
    one detector a file behind one interface, is read by its interface, not walked.)"""
    receiver = PACKAGE / "receiver"
    crowded = {str(d.relative_to(PACKAGE)): n for d in [receiver, *receiver.rglob("*/")]
               if d.is_dir() and d.name != "__pycache__" and (n := len(list(d.glob("*.py")))) > 8}
    assert crowded == {}
