"""Redaction removes raw tool payloads under every convention; the digest key never leaves."""

from __future__ import annotations

import base64
import logging
import secrets
from pathlib import Path
from typing import Callable

import pytest

from otel_loopguard.errors import LoopguardError
from otel_loopguard.processor import install
from otel_loopguard.processor.tagger import Tagger

from .helpers import (
    RAW_KEYS,
    BlockedTagger,
    Stack,
    all_text,
    captured,
    emit,
    emit_turn,
    raw_values_present,
    tags,
)

# Every tool span of the captures, including failures and ToolException results.
REDACT_ENTRIES = (
    "genai_tool",
    "genai_tool_error",
    "oi_oa_tool",
    "oi_lc_tool_1",
    "oi_lc_tool_raise",
    "oi_lc_tool_toolexception",
    "tl_lc_tool_1",
    "tl_lc_tool_toolexception",
    "tl_oa_tool",
)
# Raw argument and result text of the scenario (lookup_order A-1 / flaky_tool x=1).
NEEDLES = ("A-1", "pending", '"x": 1', "exploded", "An error occurred while running the tool")


@pytest.mark.parametrize("entry", REDACT_ENTRIES)
def test_redaction_removes_every_raw_payload_and_keeps_the_tags(stacks: Callable[..., Stack], entry: str) -> None:
    stack = stacks(redact=True)
    original = captured(entry)["attributes"]
    assert any(k in original for k in RAW_KEYS), "the captured span carries a raw payload to remove"
    emit_turn(stack.tracer, entry, noise=False)
    [tool] = stack.tool_spans()
    assert [k for k in RAW_KEYS if k in tool.attributes] == []
    assert raw_values_present(tool, NEEDLES) == []
    t = tags(tool)
    assert t["loopguard.tool.name"] in ("lookup_order", "flaky_tool")
    assert len(t["loopguard.args.digest"]) == 32 and "loopguard.seq" in t
    # What is not a payload stays: names, kinds, the tool schema, LangGraph bookkeeping.
    kept = {k for k in original if k not in RAW_KEYS}
    assert kept <= set(tool.attributes)


def test_redaction_keeps_equal_digests_for_equal_calls_and_matches_unredacted_digests(stacks: Callable[..., Stack]) -> None:
    plain, redacted = stacks(), stacks(redact=True)
    for stack in (plain, redacted):
        with stack.tracer.start_as_current_span("agent"):
            for entry in ("tl_lc_tool_1", "tl_lc_tool_2", "tl_lc_tool_1"):
                emit_turn(stack.tracer, entry)  # fresh noise each time
    a = [(tags(s)["loopguard.args.digest"], tags(s)["loopguard.result.digest"]) for s in plain.tool_spans()]
    b = [(tags(s)["loopguard.args.digest"], tags(s)["loopguard.result.digest"]) for s in redacted.tool_spans()]
    assert len(set(b)) == 1
    assert a == b, "same key: redaction changes what is exported, not the digests"


def test_redaction_keeps_working_for_decisions(stacks: Callable[..., Stack]) -> None:
    stack = stacks(redact=True)
    with stack.tracer.start_as_current_span("agent"):
        for _ in range(5):
            emit_turn(stack.tracer, "oi_lc_tool_1")
    last = stack.tool_spans()[-1]
    assert [e.attributes["loopguard.decision"] for e in last.events if e.name == "loopguard.decision"][-1] == "would_block"
    assert all(raw_values_present(s, NEEDLES) == [] for s in stack.tool_spans())


@pytest.mark.parametrize("env,argument,redacted", [("true", None, True), ("1", None, True), ("true", False, False), ("false", True, True)])
def test_redact_from_env_and_arguments_beat_env(
    stacks: Callable[..., Stack], monkeypatch: pytest.MonkeyPatch, env: str, argument: object, redacted: bool
) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_REDACT", env)
    stack = stacks(redact=argument)
    emit_turn(stack.tracer, "genai_tool")
    [tool] = stack.tool_spans()
    assert ("gen_ai.tool.call.arguments" not in tool.attributes) is redacted


# -- the key ---------------------------------------------------------------------------------


def _key_forms(secret: bytes, text: str) -> list[str]:
    return [text, secret.hex(), base64.b64encode(secret).decode(), secret.decode("latin-1")]


@pytest.mark.parametrize("source", ["argument", "env", "key_file_env", "key_file_argument"])
def test_the_key_never_appears_in_spans_events_or_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    stacks: Callable[..., Stack], source: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = b"s3cr3t-" + secrets.token_hex(12).encode()
    text = secret.decode()
    kwargs: dict[str, object] = {"key": None}  # None: make_stack's default key is not used
    if source == "argument":
        kwargs["key"] = text
    elif source == "env":
        monkeypatch.setenv("OTEL_LOOPGUARD_KEY", text)
    else:
        text = "hex:" + secret.hex()
        key_file = tmp_path / "loopguard.key"
        key_file.write_text(text + "\n")
        if source == "key_file_env":
            monkeypatch.setenv("OTEL_LOOPGUARD_KEY_FILE", str(key_file))
        else:
            kwargs["key_file"] = str(key_file)
    stack = stacks(**kwargs)
    assert not stack.handle.key_id.startswith("ephemeral"), "the configured key is in use"  # type: ignore[union-attr]
    with stack.tracer.start_as_current_span("agent"):
        for _ in range(5):  # decisions: events carry reasons
            emit_turn(stack.tracer, "tl_lc_tool_1")
        emit_turn(stack.tracer, "genai_tool_error", noise=False)
    assert stack.tp.force_flush(10_000)
    # ... and an internal failure, logged with a traceback.
    monkeypatch.setattr(Tagger, "tag", lambda self, span: 1 / 0)
    emit_turn(stack.tracer, "genai_tool")
    stack.handle.shutdown()  # type: ignore[union-attr]
    exported = all_text(stack.exporter.get_finished_spans())
    assert "loopguard.decision" in exported and stack.handle.key_id in exported  # type: ignore[union-attr]
    assert "ZeroDivisionError" in caplog.text
    for form in _key_forms(secret, text):
        assert form not in exported
        assert form not in caplog.text
        assert form not in repr(stack.handle)


@pytest.mark.parametrize(
    "kwargs,env",
    [
        ({"key": "hex:zz-not-hex-s3cr3t-value-0123"}, {}),
        ({}, {"OTEL_LOOPGUARD_KEY": "base64:!!s3cr3t-value-0123!!"}),
        ({"key": "s3cr3t"}, {}),  # too short
        ({"key_file": "s3cr3t-value-pasted-as-a-path-0123"}, {}),  # the key pasted where the path goes
        ({}, {"OTEL_LOOPGUARD_KEY_FILE": "s3cr3t-value-pasted-as-a-path-0123"}),
    ],
)
def test_key_errors_never_echo_the_key(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, kwargs: dict[str, str], env: dict[str, str]
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    caplog.set_level(logging.DEBUG)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(LoopguardError) as info:
        install(tracer_provider=TracerProvider(), **kwargs)
    assert "s3cr3t" not in str(info.value) and "s3cr3t" not in caplog.text
    assert str(info.value), "the error says what is wrong"


# -- redaction on the paths where tagging did not happen ---------------------------------------


def test_redaction_holds_when_the_queue_is_full(monkeypatch: pytest.MonkeyPatch, stacks: Callable[..., Stack]) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_QUEUE_SIZE", "1")
    blocked = BlockedTagger(monkeypatch)
    stack = stacks(redact=True)
    try:
        emit(stack.tracer, captured("genai_tool"))  # the worker takes it and blocks
        assert blocked.started.wait(5)
        emit(stack.tracer, captured("genai_tool"))  # fills the queue
        emit(stack.tracer, captured("oi_lc_tool_1"))  # queue full: passed on untagged
        assert stack.handle.processor.passed_untagged == 1  # type: ignore[union-attr]
    finally:
        blocked.release.set()
    leaked = [s for s in stack.tool_spans() if raw_values_present(s, NEEDLES)]
    assert leaked == []


def test_redaction_holds_when_tagging_fails(monkeypatch: pytest.MonkeyPatch, stacks: Callable[..., Stack]) -> None:
    stack = stacks(redact=True)
    monkeypatch.setattr(Tagger, "tag", lambda self, span: 1 / 0)
    emit(stack.tracer, captured("tl_lc_tool_1"))
    [tool] = stack.tool_spans()
    assert raw_values_present(tool, NEEDLES) == []
