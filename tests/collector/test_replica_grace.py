"""The sharded files' per-replica exporter against the root grace their replica commands give.

In the Collector release collector_config/builder.yaml pins (contrib v0.161.0), the
`loadbalancing` exporter copies `protocol.otlp` whole into the OTLP exporter it makes per
replica, and that exporter retries a refused request itself: after the larger of its backoff
(initial_interval, randomized by +-randomization_factor) and the delay the replica asks for
(RetryInfo, `retry_after_seconds`), each attempt bounded by `timeout` (the sources are cited in
collector_config/README.md, "Retries and queues behind the load balancer"). A span refused once
therefore reaches its replica up to

    batch timeout + timeout + max(initial_interval x (1 + randomization_factor), retry_after)

later than the rest of its run. A replica whose `--root-grace-seconds` is not above that judges
the run before those calls arrive, on part of them (issue 27). This file checks that bound
against every replica command shown with a sharded file and in docs/deployment.md, that the
per-replica retry and queue are spelled out (not left to the OTLP exporter's defaults: retry
from 5 s), and that the wording names the release builder.yaml pins. Negative controls mutate
a shipped file and show each check failing.
"""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "collector_config"
DEPLOYMENT = ROOT / "docs" / "deployment.md"
SHARDED = sorted(CONFIG_DIR.glob("sharded*.yaml"))
LOADBALANCING_TYPES = ("loadbalancing", "load_balancing")

# The OTLP exporter's randomization_factor when none is given (core config/configretry
# v1.67.0, generated_config.go NewDefaultBackOffConfig); the batch processor's default timeout.
DEFAULT_RANDOMIZATION = 0.5
DEFAULT_BATCH_TIMEOUT = 0.2

# Sections of docs/deployment.md that show a sharded replica command, and the files they go with.
DOC_SECTIONS = {
    "### Sharded (`collector_config/sharded.yaml`)": ["sharded.yaml", "sharded-dns.yaml"],
    "## Runs that span several traces: route by conversation id": ["sharded-by-conversation.yaml"],
}


# -- parsing ---------------------------------------------------------------------------------

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")


def seconds(value: Any, where: str) -> float:
    """A Go duration string ("500ms", "1m30s") in seconds."""
    if not isinstance(value, str) or not value or _DURATION.sub("", value) != "":
        raise ValueError(f"{where}: {value!r} is not a Go duration such as 500ms or 2s")
    return sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(value))


_SERVE = re.compile(r"^[#\s]*((?:[A-Z_]+=\S+\s+)*otel-loopguard serve\b[^\n`]*)$", re.M)


def serve_commands(text: str) -> list[str]:
    return [m.group(1).strip() for m in _SERVE.finditer(text)]


def receiver_settings(command: str) -> tuple[float, float]:
    """(root_grace_seconds, retry_after_seconds) of the receiver a documented command starts."""
    from otel_loopguard.cli import _parser
    from otel_loopguard.receiver.config import from_sources

    words = shlex.split(command)
    at = words.index("otel-loopguard")
    args = _parser().parse_args(words[at + 1:])
    env = dict(w.split("=", 1) for w in words[:at])
    config = from_sources(vars(args), env=env)
    return float(config.root_grace_seconds), float(config.retry_after_seconds)


def doc_section(text: str, heading: str) -> str:
    start = text.index(heading) + len(heading)
    level = heading.split(" ", 1)[0]
    following = [m.start() for m in re.finditer(r"^#{1,%d} " % len(level), text[start:], re.M)]
    return text[start: start + following[0]] if following else text[start:]


def load_balancers(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {cid: cfg for cid, cfg in (doc.get("exporters") or {}).items()
            if cid.split("/", 1)[0] in LOADBALANCING_TYPES and isinstance(cfg, dict)}


def batch_timeout(doc: dict[str, Any], exporter_id: str) -> float:
    """The longest batch processor timeout in a pipeline that feeds `exporter_id`."""
    processors = doc.get("processors") or {}
    longest = 0.0
    for name, pipeline in ((doc.get("service") or {}).get("pipelines") or {}).items():
        if exporter_id not in (pipeline.get("exporters") or []):
            continue
        for pid in pipeline.get("processors") or []:
            if pid.split("/", 1)[0] == "batch":
                cfg = processors.get(pid) or {}
                timeout = cfg.get("timeout")
                longest = max(longest, DEFAULT_BATCH_TIMEOUT if timeout is None
                              else seconds(timeout, f"processors.{pid}.timeout"))
    return longest


# -- the checks ------------------------------------------------------------------------------


def template_problems(doc: dict[str, Any]) -> list[str]:
    """protocol.otlp must spell out the per-replica retry, queue and timeout."""
    problems: list[str] = []
    balancers = load_balancers(doc)
    if not balancers:
        return ["no loadbalancing exporter"]
    for cid, cfg in balancers.items():
        where = f"exporters.{cid}.protocol.otlp"
        otlp = ((cfg.get("protocol") or {}).get("otlp")) or {}
        if "timeout" not in otlp:
            problems.append(f"{where}.timeout: missing (the OTLP exporter's default, 5 s, would apply)")
        retry = otlp.get("retry_on_failure")
        if not isinstance(retry, dict):
            problems.append(f"{where}.retry_on_failure: missing (the OTLP exporter's default would apply: from 5 s)")
        else:
            if retry.get("enabled") is not True:
                problems.append(f"{where}.retry_on_failure.enabled: must be true (a refused request would be dropped)")
            for key in ("initial_interval", "max_interval", "max_elapsed_time"):
                if key not in retry:
                    problems.append(f"{where}.retry_on_failure.{key}: missing")
        queue = otlp.get("sending_queue")
        if not isinstance(queue, dict) or "enabled" not in queue:
            problems.append(f"{where}.sending_queue: missing (the OTLP exporter's default queue would apply)")
        elif queue["enabled"] is True:
            for key in ("num_consumers", "queue_size"):
                if key not in queue:
                    problems.append(f"{where}.sending_queue.{key}: missing")
    return problems


def longest_refusal_delay(doc: dict[str, Any], exporter_id: str, retry_after: float) -> float:
    """How much later than the rest of its run a span refused once can reach its replica."""
    otlp = load_balancers(doc)[exporter_id]["protocol"]["otlp"]
    where = f"exporters.{exporter_id}.protocol.otlp"
    retry = otlp["retry_on_failure"]
    initial = seconds(retry["initial_interval"], f"{where}.retry_on_failure.initial_interval")
    spread = float(retry.get("randomization_factor", DEFAULT_RANDOMIZATION))
    first_wait = max(initial * (1 + spread), retry_after)
    return batch_timeout(doc, exporter_id) + seconds(otlp["timeout"], f"{where}.timeout") + first_wait


def grace_problems(doc: dict[str, Any], commands: list[str], source: str) -> list[str]:
    problems = template_problems(doc)
    if problems:
        return problems
    if not commands:
        return [f"{source}: shows no replica command"]
    for command in commands:
        grace, retry_after = receiver_settings(command)
        for cid in load_balancers(doc):
            delay = longest_refusal_delay(doc, cid, retry_after)
            if not delay < grace:
                problems.append(
                    f"{source}: --root-grace-seconds {grace:g} is not above the {delay:g} s a span refused once "
                    f"can take through exporters.{cid} (batch timeout + protocol.otlp timeout + the first retry "
                    f"wait): a run would be judged on part of its calls: {command}")
    return problems


def pinned_release() -> str:
    builder = yaml.safe_load((CONFIG_DIR / "builder.yaml").read_text(encoding="utf-8"))
    for module in builder["exporters"]:
        path, _, version = module["gomod"].partition(" ")
        if path.endswith("/loadbalancingexporter"):
            return version
    raise AssertionError("builder.yaml has no loadbalancing exporter")


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


# -- the shipped files -----------------------------------------------------------------------


def test_every_sharded_file_is_checked() -> None:
    assert {p.name for p in SHARDED} == {"sharded.yaml", "sharded-dns.yaml", "sharded-by-conversation.yaml"}
    assert {n for names in DOC_SECTIONS.values() for n in names} == {p.name for p in SHARDED}


@pytest.mark.parametrize("path", SHARDED, ids=lambda p: p.name)
def test_per_replica_retry_queue_and_timeout_are_spelled_out(path: Path) -> None:
    assert template_problems(load(path)) == []


@pytest.mark.parametrize("path", SHARDED, ids=lambda p: p.name)
def test_replica_command_in_the_file_outlasts_a_refused_span(path: Path) -> None:
    commands = serve_commands(path.read_text(encoding="utf-8"))
    assert commands, f"{path.name} shows no replica command"
    assert grace_problems(load(path), commands, path.name) == []


@pytest.mark.parametrize("heading", DOC_SECTIONS, ids=lambda h: h.split("(")[0].strip("# ").strip())
def test_replica_command_in_the_deployment_doc_outlasts_a_refused_span(heading: str) -> None:
    section = doc_section(DEPLOYMENT.read_text(encoding="utf-8"), heading)
    commands = serve_commands(section)
    assert commands, f"docs/deployment.md, {heading}: no replica command"
    for name in DOC_SECTIONS[heading]:
        assert grace_problems(load(CONFIG_DIR / name), commands, f"docs/deployment.md ({name})") == []


@pytest.mark.parametrize("path", SHARDED, ids=lambda p: p.name)
def test_the_doc_shows_the_files_replica_command(path: Path) -> None:
    doc = DEPLOYMENT.read_text(encoding="utf-8")
    for command in serve_commands(path.read_text(encoding="utf-8")):
        assert command in doc, f"docs/deployment.md does not show {path.name}'s replica command: {command}"


def test_the_wording_on_retries_names_the_pinned_release() -> None:
    """What governs the retries is release-specific: the text saying so names the release that
    builder.yaml pins, so bumping the pin without rereading the text fails here."""
    release = f"contrib {pinned_release()}"

    def words(text: str) -> str:
        return " ".join(text.replace("#", " ").split())

    sharded = words(doc_section(DEPLOYMENT.read_text(encoding="utf-8"), next(iter(DOC_SECTIONS))))
    assert release in sharded and "protocol.otlp" in sharded, sharded
    readme = (CONFIG_DIR / "README.md").read_text(encoding="utf-8")
    assert release in words(doc_section(readme, "## Retries and queues behind the load balancer"))
    for path in SHARDED:
        assert release in words(path.read_text(encoding="utf-8")), path.name


# -- the checks catch what they are for (negative controls) ----------------------------------


@pytest.fixture
def sharded() -> dict[str, Any]:
    return load(CONFIG_DIR / "sharded.yaml")


def _command(path: str = "sharded.yaml") -> list[str]:
    return serve_commands((CONFIG_DIR / path).read_text(encoding="utf-8"))


def _otlp(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["exporters"]["loadbalancing"]["protocol"]["otlp"]


def _fails(doc: dict[str, Any], commands: Optional[list[str]] = None, *words: str) -> None:
    problems = grace_problems(doc, _command() if commands is None else commands, "mutated")
    assert problems, "the check accepted a broken configuration"
    assert any(all(w in p for w in words) for p in problems), (words, problems)


def test_the_shipped_file_passes_before_mutation(sharded: dict[str, Any]) -> None:
    assert grace_problems(copy.deepcopy(sharded), _command(), "sharded.yaml") == []


@pytest.mark.parametrize("key", ["retry_on_failure", "sending_queue", "timeout"])
def test_rejects_a_per_replica_setting_left_to_the_defaults(sharded: dict[str, Any], key: str) -> None:
    del _otlp(sharded)[key]
    _fails(sharded, None, f"protocol.otlp.{key}", "missing")


def test_rejects_the_otlp_exporters_default_retry(sharded: dict[str, Any]) -> None:
    """The release's own default, the delay that judged runs on half their calls in issue 27."""
    _otlp(sharded)["retry_on_failure"]["initial_interval"] = "5s"
    _fails(sharded, None, "--root-grace-seconds 5", "9.7")


def test_rejects_a_long_per_replica_timeout(sharded: dict[str, Any]) -> None:
    _otlp(sharded)["timeout"] = "10s"
    _fails(sharded, None, "not above")


def test_rejects_a_slow_batch(sharded: dict[str, Any]) -> None:
    sharded["processors"]["batch"]["timeout"] = "3s"
    _fails(sharded, None, "not above")


def test_rejects_a_wider_jitter(sharded: dict[str, Any]) -> None:
    retry = _otlp(sharded)["retry_on_failure"]
    retry["initial_interval"], retry["randomization_factor"] = "2s", 0.9
    _fails(sharded, None, "not above")


def test_rejects_retries_turned_off(sharded: dict[str, Any]) -> None:
    _otlp(sharded)["retry_on_failure"]["enabled"] = False
    _fails(sharded, None, "retry_on_failure.enabled")


def test_rejects_the_receivers_default_grace(sharded: dict[str, Any]) -> None:
    """The command as it was before issue 27: no --root-grace-seconds, so 2 s."""
    commands = [re.sub(r" --root-grace-seconds \S+", "", c) for c in _command()]
    assert commands != _command()
    _fails(sharded, commands, "--root-grace-seconds 2 ")


def test_rejects_a_grace_equal_to_the_delay(sharded: dict[str, Any]) -> None:
    # 0.2 s batch + 2 s timeout + max(0.75 s, 1 s asked by the replica) = 3.2 s
    commands = [c.replace("--root-grace-seconds 5", "--root-grace-seconds 3.2") for c in _command()]
    _fails(sharded, commands, "3.2")
    commands = [c.replace("--root-grace-seconds 5", "--root-grace-seconds 3.3") for c in _command()]
    assert grace_problems(sharded, commands, "mutated") == []


def test_rejects_a_file_without_a_command(sharded: dict[str, Any]) -> None:
    _fails(sharded, [], "no replica command")


def test_durations_parse_as_go_does() -> None:
    assert seconds("500ms", "x") == 0.5 and seconds("1m30s", "x") == 90 and seconds("2s", "x") == 2
    for bad in ("5", 5, "", "5 s", "five"):
        with pytest.raises(ValueError):
            seconds(bad, "x")
