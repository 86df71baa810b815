"""Policy: thresholds and per-tool rules, loaded and validated (pure)."""

from .load import PRESETS, check_replacement, content_version, load_policy, policy_from_mapping, read_policy_data
from .model import (
    BUILTIN_VERSION,
    BudgetRule,
    CycleRule,
    EquivalenceRule,
    Policy,
    PollRule,
    Price,
    ProgressRule,
    RepeatRule,
    StreakRule,
    ToolRule,
)

__all__ = [
    "BUILTIN_VERSION",
    "BudgetRule",
    "CycleRule",
    "EquivalenceRule",
    "PRESETS",
    "Policy",
    "PollRule",
    "Price",
    "ProgressRule",
    "RepeatRule",
    "StreakRule",
    "ToolRule",
    "check_replacement",
    "content_version",
    "load_policy",
    "policy_from_mapping",
    "read_policy_data",
]
