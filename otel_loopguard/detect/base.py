"""What every detector shares: the per-call step it observes, and the warn/stop latch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol

from ..calls import ModelCall, ToolCall
from ..findings import STOP, WARN, Finding
from ..policy import ToolRule
from ..progress import Judgement


@dataclass(slots=True)
class Step:
    """One call as the run hands it to the detectors.

    `decision` numbers the model decisions of the run: calls requested by the
    same decision (same `turn`) are siblings and share it. Treated as immutable
    (not frozen only because frozen dataclasses are slower to build, once per call).
    """

    call: ToolCall
    decision: int
    judgement: Judgement
    rule: ToolRule


class Detector(Protocol):
    def observe(self, step: Step) -> list[Finding]: ...


class Preview(Protocol):
    """Detectors that can say, before a call runs, that running it crosses a threshold."""

    kind: str

    def preview(self, step: Step) -> Optional[tuple[str, str]]: ...  # (severity, reason)


class ModelObserver(Protocol):
    def observe_model(self, model: ModelCall, last: Optional[ToolCall]) -> list[Finding]: ...


class Latch:
    """Fires warn once, then stop once, as a count climbs; stop wins a tie."""

    __slots__ = ("warned", "stopped")

    def __init__(self) -> None:
        self.warned = False
        self.stopped = False

    def level(self, count: float, warn_at: float, stop_at: float) -> Optional[str]:
        if count >= stop_at and not self.stopped:
            self.stopped = self.warned = True
            return STOP
        if count >= warn_at and not self.warned:
            self.warned = True
            return WARN
        return None
