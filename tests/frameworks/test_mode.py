"""One mode: OTEL_LOOPGUARD_MODE and install(mode=...) govern the guard and the tags alike.

A real LangChain v1 agent (scripted model) under install() and an instrumentation, guarded by
`LoopGuardMiddleware`; the tool counts its invocations. docs/guard.md, "Mode".
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain_core.tools import tool  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import otel_loopguard  # noqa: E402
from otel_loopguard.enforce import make_guard  # noqa: E402
from otel_loopguard.enforce.langchain import LoopGuardMiddleware  # noqa: E402
from otel_loopguard.mode import ModeError  # noqa: E402
from otel_loopguard.processor import install  # noqa: E402

from .lc_helpers import (  # noqa: E402,F401 - fixtures are used by name
    KEY,
    Stack,
    _clean_lc_env,
    decision_events,
    lc,
    lc_instrumented,
    model,
    repeat,
    run_agent,
)


def _loop(lc: Stack, guard: Any, times: int = 6) -> tuple[list, list, list]:
    invoked: list = []

    @tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order's status."""
        invoked.append(order_id)
        return {"status": "delivered", "order": order_id}

    chat = model(repeat("lookup_order", {"order_id": "A12"}, times) + ["done"])
    with lc.provider.get_tracer("mode-tests").start_as_current_span("invoke_agent support"):
        run_agent(chat, [lookup_order], [LoopGuardMiddleware(guard)])
    spans = lc.spans()
    verbs = [e.attributes["loopguard.decision"] for _, e in decision_events(spans)
             if "loopguard.dispatched" in e.attributes]
    modes = [s.attributes.get("loopguard.mode") for s in lc.tool_spans(spans, "lookup_order")]
    return invoked, verbs, modes


def test_otel_loopguard_mode_observe_keeps_the_guard_from_denying(lc: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "observe")
    guard = make_guard(key=KEY)
    assert guard.mode == "observe"
    invoked, verbs, modes = _loop(lc, guard)
    assert invoked == ["A12"] * 6  # nothing denied
    assert verbs == ["would_warn", "would_warn", "would_block", "would_block"]
    assert set(modes) == {"observe"}


def test_otel_loopguard_mode_enforce_makes_the_guard_deny_and_the_spans_say_so(
        lc: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "enforce")
    invoked, verbs, modes = _loop(lc, make_guard(key=KEY))
    assert invoked == ["A12"] * 4
    assert verbs == ["warn", "warn", "deny", "deny"]
    assert modes and set(modes) == {"enforce"}  # install() ran before the variable was set


def test_without_any_setting_an_enforcing_guards_runs_are_tagged_enforce(lc: Stack) -> None:
    invoked, verbs, modes = _loop(lc, otel_loopguard.guard(key=KEY))
    assert invoked == ["A12"] * 4 and "deny" in verbs
    assert set(modes) == {"enforce"}


def test_negative_control_a_run_no_guard_judged_is_tagged_observe(lc: Stack) -> None:
    invoked: list = []

    @tool
    def lookup_order(order_id: str) -> dict:
        """Look up an order's status."""
        invoked.append(order_id)
        return {"status": "delivered"}

    with lc.provider.get_tracer("mode-tests").start_as_current_span("invoke_agent support"):
        run_agent(model(repeat("lookup_order", {"order_id": "A12"}, 2) + ["done"]), [lookup_order])
    modes = [s.attributes.get("loopguard.mode") for s in lc.tool_spans(lc.spans(), "lookup_order")]
    assert modes == ["observe", "observe"]


def test_install_mode_observe_governs_guards_without_a_mode_until_it_shuts_down() -> None:
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guard = make_guard(key=KEY)  # made before install(): asked again at every check
    assert guard.mode == "enforce"
    install(tracer_provider=provider, key=KEY, mode="observe")
    try:
        assert guard.mode == "observe" and make_guard(key=KEY).mode == "observe"
        assert make_guard(key=KEY, mode="enforce").mode == "enforce"  # its own argument wins
        invoked = []

        @guard.tool
        def lookup_order(order_id: str) -> dict:
            invoked.append(order_id)
            return {"status": "delivered"}

        with provider.get_tracer("t").start_as_current_span("invoke_agent"):
            for _ in range(6):
                lookup_order("A12")
        assert len(invoked) == 6
    finally:
        provider.shutdown()
    assert guard.mode == "enforce"  # that install is gone


def test_guard_arguments_are_checked_with_a_clear_message() -> None:
    with pytest.raises(TypeError, match=r"unknown argument mdoe; it takes mode, policy, key, key_file, enforce"):
        otel_loopguard.guard(mdoe="enforce")
    with pytest.raises(ModeError, match="mode: expected one of observe, enforce, got 'block'"):
        otel_loopguard.guard(key=KEY, mode="block")
    with pytest.raises(ModeError, match="contradicts"):
        otel_loopguard.guard(key=KEY, mode="enforce", enforce=False)
    assert otel_loopguard.guard(key=KEY, mode="observe").mode == "observe"  # type: ignore[attr-defined]


def test_a_bad_otel_loopguard_mode_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOOPGUARD_MODE", "enforse")
    from otel_loopguard.errors import LoopguardError

    with pytest.raises(LoopguardError, match="OTEL_LOOPGUARD_MODE: .*expected one of observe, enforce"):
        make_guard(key=KEY)  # at once, as install() does, not at the first call
