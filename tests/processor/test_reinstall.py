"""install() twice, and install() after handle.shutdown() (issue 28, defect 6; docs/processor.md):

- a second install() asking for nothing different returns the running handle;
- one asking for another setting (install(mode="observe") after install(mode="enforce"), say)
  is refused with an error naming the setting, instead of silently keeping the first one's;
- handle.shutdown() takes the loop guard out and gives the provider its processors back,
  still exporting; install() afterwards gives a live handle whose tool spans are tagged."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from otel_loopguard.enforce import make_guard
from otel_loopguard.processor import ProcessorConfigError, install
from otel_loopguard.processor.sdk_shape import span_processors

from .helpers import KEY, Stack, emit_turn, tags


def _loop(guard: Any, n: int = 6) -> list[str]:
    @guard.tool
    def lookup_order(order_id: str) -> dict:
        return {"status": "delivered"}

    with guard.run():
        return [str(lookup_order("A12")) for _ in range(n)]


def test_a_second_install_with_another_mode_is_refused_and_guards_keep_the_first(
        stacks: Callable[..., Stack], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_LOOPGUARD_MODE", raising=False)
    stack = stacks(mode="enforce")
    guard = make_guard(key=KEY)
    with pytest.raises(ProcessorConfigError, match=r"mode='observe' \(installed: 'enforce'\).*set_mode\('observe'\)"):
        install(tracer_provider=stack.tp, key=KEY, mode="observe")
    assert guard.mode == "enforce"  # nothing changed, and the caller was told
    assert install(tracer_provider=stack.tp, key=KEY, mode="enforce") is stack.handle  # the same settings


def test_a_second_install_naming_a_mode_the_first_was_not_given_is_refused(stacks: Callable[..., Stack]) -> None:
    """The first install left guards to their default (enforce): a mode now would change them."""
    stack = stacks()
    with pytest.raises(ProcessorConfigError, match="not given to install"):
        install(tracer_provider=stack.tp, mode="observe")
    with pytest.raises(ProcessorConfigError, match="redact=True"):
        install(tracer_provider=stack.tp, redact=True)
    assert install(tracer_provider=stack.tp) is stack.handle  # no setting asked: the running one


def test_after_handle_shutdown_install_gives_a_live_handle_that_exports(stacks: Callable[..., Stack]) -> None:
    stack = stacks()
    first = stack.handle
    assert first is not None
    first.shutdown()
    emit_turn(stack.tracer, "genai_tool")  # the provider's own processors again: exported, untagged
    [untagged] = stack.tool_spans()
    assert "loopguard.seq" not in (untagged.attributes or {})
    assert first.processor not in span_processors(stack.tp)

    again = install(tracer_provider=stack.tp, key=KEY, mode="observe")  # other settings are fine now
    assert again is not first and again.mode == "observe"
    stack.exporter.clear()
    emit_turn(stack.tracer, "genai_tool")
    [tool] = stack.tool_spans()
    assert tags(tool)["loopguard.seq"] == 1 and tags(tool)["loopguard.mode"] == "observe"
    assert span_processors(stack.tp) == (again.processor,)
    again.shutdown()


def test_handle_shutdown_stops_guards_following_its_mode(stacks: Callable[..., Stack],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_LOOPGUARD_MODE", raising=False)
    stack = stacks(mode="observe")
    guard = make_guard(key=KEY)
    assert not any(o.startswith("Not executed") for o in _loop(guard))
    assert stack.handle is not None
    stack.handle.shutdown()
    assert [i for i, o in enumerate(_loop(guard), 1) if o.startswith("Not executed")] == [5, 6]
