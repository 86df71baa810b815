"""In-process processor: tag tool spans with keyed digests, sequence and turn; judge runs.

    import otel_loopguard
    otel_loopguard.install()          # observe-only; see docs/processor.md
"""

from .config import ProcessorConfig, ProcessorConfigError
from .exporter import LoopguardOTLPSpanExporter, LoopguardSpanExporter
from .install import LoopguardHandle, build_tagger, install
from .span_processor import LoopguardSpanProcessor
from .tagger import DECISION_EVENT, Tagger

__all__ = [
    "DECISION_EVENT",
    "LoopguardHandle",
    "LoopguardOTLPSpanExporter",
    "LoopguardSpanExporter",
    "LoopguardSpanProcessor",
    "ProcessorConfig",
    "ProcessorConfigError",
    "Tagger",
    "build_tagger",
    "install",
]
