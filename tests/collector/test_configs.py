"""collector_config/*.yaml against the Collector's documented keys (tests/collector/components.py).

The real Collector validates and runs every file in test_pipelines.py. This check needs no
Go and no build, and holds the project's own rules beside the documented keys: component
types, every key at every depth, enum values, pipeline wiring, processor order, the load
balancer's rules, no findings fed back into otel-loopguard, trace-id routing in the sharded
files. Negative tests prove the checker rejects the mistakes it is meant to catch.
"""

from __future__ import annotations

import difflib
import re
import shlex
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from . import components as C

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "collector_config"
CONFIGS = sorted(p for p in CONFIG_DIR.glob("*.yaml") if p.name != "builder.yaml")  # builder.yaml: the build

# Naming convention of collector_config/ (its README): receivers that take otel-loopguard's
# output, exporters that feed otel-loopguard.
FROM_LOOPGUARD_RECEIVERS = ("findings", "guarded")  # otlp/findings, otlp/guarded


# -- the checker -----------------------------------------------------------------------------


def _type(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def _unknown(path: str, key: str, known: Any) -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{path}.{key}: not a documented key{hint}; documented: {', '.join(sorted(known))}"


def validate(value: Any, spec: Any, path: str) -> list[str]:
    """Problems of one value against its schema node; [] when it conforms."""
    if isinstance(spec, C.Map):
        if value is None:
            return [] if spec.nullable else [f"{path}: needs settings, got nothing"]
        if not isinstance(value, dict):
            return [f"{path}: expected a mapping, got {type(value).__name__}"]
        if spec.free:
            return []
        problems: list[str] = []
        for key, sub in value.items():
            if key not in spec.keys:
                problems.append(_unknown(path, str(key), spec.keys))
            else:
                problems += validate(sub, spec.keys[key], f"{path}.{key}")
        return problems
    if isinstance(spec, C.ListOf):
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        return [p for i, item in enumerate(value) for p in validate(item, spec.item, f"{path}[{i}]")]
    if isinstance(value, (dict, list)):
        return [f"{path}: expected a single value, got {type(value).__name__}"]
    if spec.choices is not None and value not in spec.choices:
        return [f"{path}: {value!r} is not one of {', '.join(sorted(map(str, spec.choices)))}"]
    return []


def _pipelines(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    service = doc.get("service") or {}
    pipelines = service.get("pipelines") if isinstance(service, dict) else None
    return pipelines if isinstance(pipelines, dict) else {}


def check(doc: Any) -> list[str]:
    """Every problem of one Collector configuration document."""
    if not isinstance(doc, dict):
        return ["top level: expected a mapping"]
    problems: list[str] = []
    for key in doc:
        if key not in C.TOP_LEVEL_KEYS:
            problems.append(_unknown("(top level)", str(key), C.TOP_LEVEL_KEYS))

    # Components: known type, documented keys.
    defined: dict[str, set[str]] = {}
    for kind, registry in C.COMPONENT_KINDS.items():
        section = doc.get(kind) or {}
        if not isinstance(section, dict):
            problems.append(f"{kind}: expected a mapping of components")
            continue
        defined[kind] = set(section)
        for cid, cfg in section.items():
            ctype = _type(str(cid))
            if ctype not in registry:
                problems.append(f"{kind}.{cid}: {ctype!r} is not a component type this schema documents"
                                f" ({', '.join(sorted(registry)) or 'none'})")
                continue
            problems += validate(cfg, registry[ctype], f"{kind}.{cid}")

    # Service: keys, pipelines, references.
    service = doc.get("service")
    if not isinstance(service, dict):
        return problems + ["service: missing (a Collector with no pipelines does nothing)"]
    for key in service:
        if key not in C.SERVICE_KEYS:
            problems.append(_unknown("service", str(key), C.SERVICE_KEYS))
    if "telemetry" in service:
        problems += validate(service["telemetry"], C.TELEMETRY, "service.telemetry")
    pipelines = _pipelines(doc)
    if not pipelines:
        problems.append("service.pipelines: no pipeline")
    used: dict[str, set[str]] = {k: set() for k in ("receivers", "processors", "exporters")}
    for name, pipeline in pipelines.items():
        where = f"service.pipelines.{name}"
        if _type(str(name)) not in C.PIPELINE_SIGNALS:
            problems.append(f"{where}: pipeline type must be one of {', '.join(sorted(C.PIPELINE_SIGNALS))}")
        found = validate(pipeline, C.PIPELINE, where)
        problems += found
        if found:
            continue
        for kind in ("receivers", "processors", "exporters"):
            ids = pipeline.get(kind) or []
            if kind != "processors" and not ids:
                problems.append(f"{where}.{kind}: a pipeline needs at least one")
            for dup in sorted({i for i in ids if ids.count(i) > 1}):
                problems.append(f"{where}.{kind}: {dup} listed twice")
            for cid in ids:
                used[kind].add(cid)
                if cid not in defined.get(kind, set()):
                    problems.append(f"{where}.{kind}: {cid} is not defined under {kind}")
        problems += _processor_order(where, pipeline.get("processors") or [])
    for kind, ids in used.items():
        for cid in sorted(defined.get(kind, set()) - ids):
            problems.append(f"{kind}.{cid}: defined but used by no pipeline")

    problems += _load_balancer_rules(doc, pipelines)
    problems += _no_feedback(doc, pipelines)
    return problems


def _processor_order(where: str, processors: list[str]) -> list[str]:
    types = [_type(p) for p in processors]
    problems = []
    if not types or types[0] != "memory_limiter":
        problems.append(f"{where}.processors: memory_limiter must come first (got {processors})")
    if "batch" in types and "memory_limiter" in types and types.index("batch") < types.index("memory_limiter"):
        problems.append(f"{where}.processors: batch must come after memory_limiter")
    return problems


def _load_balancers(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for cid, cfg in (doc.get("exporters") or {}).items():
        if _type(cid) in C.LOADBALANCING_TYPES and isinstance(cfg, dict):
            yield cid, cfg


def _load_balancer_rules(doc: dict[str, Any], pipelines: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for cid, cfg in _load_balancers(doc):
        where = f"exporters.{cid}"
        resolvers = [r for r in C.RESOLVERS if r in (cfg.get("resolver") or {})]
        if len(resolvers) != 1:
            problems.append(f"{where}.resolver: give exactly one of {', '.join(C.RESOLVERS)} (got {resolvers or 'none'})")
        if "static" in resolvers and not (cfg["resolver"]["static"] or {}).get("hostnames"):
            problems.append(f"{where}.resolver.static.hostnames: empty")
        if "dns" in resolvers and not (cfg["resolver"]["dns"] or {}).get("hostname"):
            problems.append(f"{where}.resolver.dns.hostname: required")
        key = cfg.get("routing_key", "traceID")
        # config.go Validate(): routing_attributes is required with, and only allowed with,
        # routing_key: attributes.
        if key == "attributes" and not cfg.get("routing_attributes"):
            problems.append(f"{where}.routing_attributes: required when routing_key is attributes")
        if key != "attributes" and "routing_attributes" in cfg:
            problems.append(f"{where}.routing_attributes: only allowed with routing_key: attributes")
        for name, pipeline in pipelines.items():
            if _type(name) == "traces" and cid in ((pipeline or {}).get("exporters") or []):
                if key not in C.LOADBALANCING_TRACE_ROUTING_KEYS:
                    problems.append(f"{where}.routing_key: {key!r} is not supported in a traces pipeline "
                                    f"({', '.join(sorted(C.LOADBALANCING_TRACE_ROUTING_KEYS))})")
    return problems


def _to_loopguard(exporter_id: str) -> bool:
    return _type(exporter_id) in C.LOADBALANCING_TYPES or exporter_id.split("/", 1)[-1].startswith("loopguard")


def _no_feedback(doc: dict[str, Any], pipelines: dict[str, Any]) -> list[str]:
    problems = []
    for name, pipeline in pipelines.items():
        if not isinstance(pipeline, dict):
            continue
        takes_findings = [r for r in pipeline.get("receivers") or [] if r.split("/", 1)[-1] in FROM_LOOPGUARD_RECEIVERS]
        feeds_loopguard = [e for e in pipeline.get("exporters") or [] if _to_loopguard(e)]
        if takes_findings and feeds_loopguard:
            problems.append(f"service.pipelines.{name}: receives otel-loopguard's output ({takes_findings}) and sends it "
                            f"back to otel-loopguard ({feeds_loopguard}): finding spans would be judged as tool calls")
    return problems


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


# -- every shipped file ----------------------------------------------------------------------


def test_the_expected_configurations_exist() -> None:
    names = {p.name for p in CONFIGS}
    assert {"fanout.yaml", "inline-with-collector.yaml", "sharded.yaml", "sharded-dns.yaml",
            "sharded-by-conversation.yaml"} <= names
    assert (CONFIG_DIR / "inline.md").is_file()


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_uses_only_documented_components_and_keys(path: Path) -> None:
    assert check(load(path)) == []


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_exporter_that_leaves_the_host_queues_and_retries(path: Path) -> None:
    leaving = {cid: cfg for cid, cfg in (load(path).get("exporters") or {}).items() if _type(cid) != "debug"}
    assert leaving, f"{path.name}: no exporter besides debug, so nothing here was checked"
    for cid, cfg in leaving.items():
        assert (cfg.get("sending_queue") or {}).get("enabled") is True, f"{path.name}: {cid} has no sending_queue"
        assert (cfg.get("retry_on_failure") or {}).get("enabled") is True, f"{path.name}: {cid} has no retry_on_failure"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_memory_limiter_is_set_sensibly(path: Path) -> None:
    for cid, cfg in (load(path).get("processors") or {}).items():
        if _type(cid) != "memory_limiter":
            continue
        assert cfg.get("check_interval"), "the README: check_interval defaults to 0s (no checks)"
        if "limit_mib" in cfg:
            assert 0 < cfg.get("spike_limit_mib", cfg["limit_mib"] // 5) < cfg["limit_mib"]
        else:
            assert 0 < cfg.get("spike_limit_percentage", 0) < cfg["limit_percentage"] <= 90


def test_fanout_copies_every_span_and_sends_findings_to_the_backend() -> None:
    pipelines = _pipelines(load(CONFIG_DIR / "fanout.yaml"))
    assert set(pipelines["traces"]["exporters"]) >= {"otlp/backend", "otlp/loopguard"}
    assert pipelines["traces/findings"]["receivers"] == ["otlp/findings"]
    assert "otlp/backend" in pipelines["traces/findings"]["exporters"]


def test_inline_with_collector_passes_everything_through_the_receiver() -> None:
    pipelines = _pipelines(load(CONFIG_DIR / "inline-with-collector.yaml"))
    assert pipelines["traces"]["exporters"] == ["otlp/loopguard"]  # no bypass to the backend
    assert pipelines["traces/guarded"]["exporters"] == ["otlp/backend"]


@pytest.mark.parametrize("name,resolver", [("sharded.yaml", "static"), ("sharded-dns.yaml", "dns")])
def test_sharded_routes_by_trace_id(name: str, resolver: str) -> None:
    doc = load(CONFIG_DIR / name)
    balancers = dict(_load_balancers(doc))
    assert balancers, f"{name}: no load-balancing exporter"
    for cfg in balancers.values():
        assert cfg["routing_key"] == "traceID"
        assert list(cfg["resolver"]) == [resolver]
    if resolver == "static":
        assert len(balancers["loadbalancing"]["resolver"]["static"]["hostnames"]) >= 2
    else:
        assert set(balancers["loadbalancing"]["resolver"]["dns"]) == {"hostname", "port", "interval", "timeout"}
    traces = _pipelines(doc)["traces"]
    assert set(traces["exporters"]) == {"otlp/backend", "loadbalancing"}


def test_conversation_variant_routes_by_the_attribute_the_receivers_group_by() -> None:
    path = CONFIG_DIR / "sharded-by-conversation.yaml"
    cfg = load(path)["exporters"]["loadbalancing"]
    assert cfg["routing_key"] == "attributes"
    assert cfg["routing_attributes"] == ["gen_ai.conversation.id"]
    commands = [c for c in _serve_commands(path.read_text(encoding="utf-8"))]
    assert commands and all("--run-id-attribute gen_ai.conversation.id" in c for c in commands)


# -- the commands shown next to the configs are real ------------------------------------------

_SERVE = re.compile(r"^[#\s]*((?:[A-Z_]+=\S+\s+)*otel-loopguard serve\b[^\n`]*)$", re.M)


def _serve_commands(text: str) -> list[str]:
    return [m.group(1).strip() for m in _SERVE.finditer(text)]


def _command_sources() -> list[Path]:
    return [*CONFIGS, *CONFIG_DIR.glob("*.md"), ROOT / "docs" / "deployment.md"]


@pytest.mark.parametrize("path", _command_sources(), ids=lambda p: p.name)
def test_serve_commands_parse_with_the_real_command_line(path: Path) -> None:
    from otel_loopguard.cli import _parser

    commands = _serve_commands(path.read_text(encoding="utf-8"))
    if path.suffix == ".yaml":
        assert commands, f"{path.name} should show how to run the receiver"
    for command in commands:
        words = shlex.split(command)
        argv = words[words.index("otel-loopguard") + 1:]
        try:
            args = _parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"{path.name}: not a valid command: {command}")
        env = dict(w.split("=", 1) for w in words[: words.index("otel-loopguard")])
        if args.findings_only:
            assert env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"), (
                f"{path.name}: --findings-only needs a destination: {command}")


def test_settings_file_in_inline_md_is_accepted_by_the_receiver(tmp_path: Path) -> None:
    from otel_loopguard.receiver.config import from_sources

    text = (CONFIG_DIR / "inline.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block
    settings = tmp_path / "serve.yaml"
    settings.write_text(block.group(1), encoding="utf-8")
    config = from_sources({}, env={}, config_file=str(settings))
    assert config.forward == "backend:4317" and config.listen == "0.0.0.0:4327"


# -- the checker catches what it is for (negative tests) -------------------------------------


@pytest.fixture
def fanout() -> dict[str, Any]:
    return load(CONFIG_DIR / "fanout.yaml")


@pytest.fixture
def sharded() -> dict[str, Any]:
    return load(CONFIG_DIR / "sharded.yaml")


def _problems_mentioning(doc: Any, *words: str) -> list[str]:
    problems = check(doc)
    assert problems, "the checker accepted a broken configuration"
    hits = [p for p in problems if all(w in p for w in words)]
    assert hits, f"no problem mentions {words}: {problems}"
    return hits


def test_rejects_a_misspelled_nested_key(fanout: dict[str, Any]) -> None:
    grpc = fanout["receivers"]["otlp"]["protocols"]["grpc"]
    grpc["endpont"] = grpc.pop("endpoint")
    hits = _problems_mentioning(fanout, "receivers.otlp.protocols.grpc.endpont")
    assert "did you mean 'endpoint'" in hits[0]


@pytest.mark.parametrize("section,bad", [
    ("sending_queue", "queue_sise"), ("retry_on_failure", "max_elapsed"), ("tls", "insecure_skip_verfy"),
])
def test_rejects_misspelled_exporter_settings(fanout: dict[str, Any], section: str, bad: str) -> None:
    fanout["exporters"]["otlp/backend"][section][bad] = 1
    _problems_mentioning(fanout, f"exporters.otlp/backend.{section}.{bad}")


def test_rejects_a_misspelled_processor_key(fanout: dict[str, Any]) -> None:
    fanout["processors"]["memory_limiter"]["limit_percent"] = 80
    _problems_mentioning(fanout, "processors.memory_limiter.limit_percent")


def test_rejects_a_bad_enum_value(fanout: dict[str, Any]) -> None:
    fanout["exporters"]["debug"]["verbosity"] = "verbose"
    _problems_mentioning(fanout, "verbosity", "'verbose'")


def test_rejects_an_unknown_component_type(fanout: dict[str, Any]) -> None:
    fanout["exporters"]["otlpgrpc/backend"] = fanout["exporters"].pop("otlp/backend")
    _problems_mentioning(fanout, "otlpgrpc")


def test_rejects_an_undefined_component_in_a_pipeline(fanout: dict[str, Any]) -> None:
    fanout["service"]["pipelines"]["traces"]["exporters"].append("otlp/nowhere")
    _problems_mentioning(fanout, "otlp/nowhere", "not defined")


def test_rejects_a_defined_but_unused_component(fanout: dict[str, Any]) -> None:
    fanout["processors"]["batch/spare"] = {"timeout": "1s"}
    _problems_mentioning(fanout, "batch/spare", "used by no pipeline")


def test_rejects_memory_limiter_not_first(fanout: dict[str, Any]) -> None:
    fanout["service"]["pipelines"]["traces"]["processors"] = ["batch", "memory_limiter"]
    _problems_mentioning(fanout, "memory_limiter must come first")


def test_rejects_a_pipeline_without_memory_limiter(fanout: dict[str, Any]) -> None:
    fanout["service"]["pipelines"]["traces/findings"]["processors"] = ["batch"]
    _problems_mentioning(fanout, "traces/findings", "memory_limiter must come first")


def test_rejects_an_unknown_top_level_or_service_key(fanout: dict[str, Any]) -> None:
    fanout["exporter"] = {}
    fanout["service"]["pipeline"] = {}
    _problems_mentioning(fanout, "(top level).exporter", "did you mean 'exporters'")
    _problems_mentioning(fanout, "service.pipeline", "did you mean 'pipelines'")


def test_rejects_findings_fed_back_into_loopguard(fanout: dict[str, Any]) -> None:
    fanout["service"]["pipelines"]["traces/findings"]["exporters"].append("otlp/loopguard")
    _problems_mentioning(fanout, "traces/findings", "judged as tool calls")


def test_rejects_a_misspelled_resolver_key(sharded: dict[str, Any]) -> None:
    static = sharded["exporters"]["loadbalancing"]["resolver"]["static"]
    static["hostname"] = static.pop("hostnames")
    _problems_mentioning(sharded, "resolver.static.hostname", "did you mean 'hostnames'")


def test_rejects_a_misspelled_routing_key_value(sharded: dict[str, Any]) -> None:
    sharded["exporters"]["loadbalancing"]["routing_key"] = "traceId"
    _problems_mentioning(sharded, "routing_key", "'traceId'")


def test_rejects_a_metrics_only_routing_key_in_a_traces_pipeline(sharded: dict[str, Any]) -> None:
    sharded["exporters"]["loadbalancing"]["routing_key"] = "streamID"
    _problems_mentioning(sharded, "not supported in a traces pipeline")


def test_rejects_attribute_routing_without_attributes(sharded: dict[str, Any]) -> None:
    sharded["exporters"]["loadbalancing"]["routing_key"] = "attributes"
    _problems_mentioning(sharded, "routing_attributes: required")


def test_rejects_routing_attributes_without_attribute_routing(sharded: dict[str, Any]) -> None:
    sharded["exporters"]["loadbalancing"]["routing_attributes"] = ["gen_ai.conversation.id"]
    _problems_mentioning(sharded, "only allowed with routing_key: attributes")


def test_rejects_two_resolvers(sharded: dict[str, Any]) -> None:
    sharded["exporters"]["loadbalancing"]["resolver"]["dns"] = {"hostname": "replicas", "port": 4327}
    _problems_mentioning(sharded, "exactly one of")


def test_rejects_an_endpoint_in_the_load_balancer_template(sharded: dict[str, Any]) -> None:
    sharded["exporters"]["loadbalancing"]["protocol"]["otlp"]["endpoint"] = "loopguard-0:4327"
    _problems_mentioning(sharded, "protocol.otlp.endpoint")


def test_accepts_the_new_load_balancing_spelling(sharded: dict[str, Any]) -> None:
    sharded["exporters"]["load_balancing"] = sharded["exporters"].pop("loadbalancing")
    traces = sharded["service"]["pipelines"]["traces"]
    traces["exporters"] = ["load_balancing" if e == "loadbalancing" else e for e in traces["exporters"]]
    assert check(sharded) == []


def test_schema_names_a_source_for_every_component() -> None:
    text = Path(C.__file__).read_text(encoding="utf-8")
    sources = text.split('"""', 2)[1]
    for kind, registry in C.COMPONENT_KINDS.items():
        for ctype in registry:
            assert ctype in sources or ctype.replace("_", "") in sources, f"{kind}/{ctype}: no source cited"
