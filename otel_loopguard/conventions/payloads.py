"""Framework wrappers around tool arguments and results, peeled off before fingerprinting.

Learned from real spans (research/conventions/FINDINGS.md):
- OpenLLMetry on LangChain wraps arguments as {"input_str", "tags", "metadata",
  "inputs", "kwargs"}; only `inputs` is stable (metadata holds per-call ids).
- LangChain results are serialised ToolMessages that embed the per-call
  `tool_call_id`; only `content` and `status` describe the outcome.
  OpenInference: {"type": "tool", "data": {...}}; OpenLLMetry:
  {"output": {"lc": 1, "kwargs": {...}}, ...}.
- OpenLLMetry on LlamaIndex writes the whole ToolOutput: {"tool_name", "tool_kwargs",
  "tool_id", "tool_output": {"blocks", "raw_input", "raw_output", "is_error", ...}}; the
  outcome is `raw_output` and `is_error` (the rest repeats the call, the id changes per call).
- OpenInference on LlamaIndex records every keyword a tool function receives, the workflow's
  `Context` too, as Python's default repr: `<workflows.context.context.Context object at
  0x7f61fcc80d90>`. Such a repr is a handle on an object, not content the call asks with: the
  address changes every run, the class is the parameter's type. It is masked whole (to a
  mask with no word in it, so it weighs nothing in an argument sketch either), so two calls
  that differ in nothing else are one action, and two that differ in one argument stay apart.
Anything else is returned untouched. Substring tests keep the common path cheap.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

ADDRESS_MARK = " object at 0x"  # Python's default repr: `<module.Class object at 0x7f...>`
_ADDRESS = re.compile(r"<[A-Za-z_][\w.]* object at 0x[0-9a-fA-F]+>")
OBJECT_MASK = "<?>"


def _parsed(value: Any, needle: str) -> Optional[dict[str, Any]]:
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or needle not in value:
        return None
    try:
        obj = json.loads(value)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the stack allows
        return None
    return obj if isinstance(obj, dict) else None


def unwrap_arguments(value: Any) -> Any:
    if type(value) is str and '"input_str"' not in value:
        # the common case, settled without a call
        return value if ADDRESS_MARK not in value else without_addresses(value)
    obj = _parsed(value, '"input_str"')
    if obj is not None and "input_str" in obj and "inputs" in obj:
        return obj["inputs"]
    return value


def without_addresses(text: str) -> str:
    """Text with each default object repr (`<pkg.Class object at 0x...>`) masked."""
    return _ADDRESS.sub(OBJECT_MASK, text)


NUDGE_MARK = "\n\n[loop guard] "  # what the guard appends to a text result on warn


def unwrap_result(value: Any) -> tuple[Any, bool]:
    """(the outcome-bearing part of a result, whether it reports an error)."""
    if type(value) is str and '"tool_call_id"' not in value and NUDGE_MARK not in value and TOOL_OUTPUT not in value:
        return value, False  # the common case, settled without a call
    if isinstance(value, str) and NUDGE_MARK in value:
        value = value.split(NUDGE_MARK, 1)[0]  # the guard's nudge is not part of the result
    output = _tool_output(value)
    if output is not None:
        return output
    obj = _parsed(value, '"tool_call_id"')
    if obj is None:
        return value, False
    message = _tool_message(obj)
    if message is None:
        return value, False
    status = message.get("status")
    return {"content": message.get("content"), "status": status}, status == "error"


TOOL_OUTPUT = '"tool_output"'


def _tool_output(value: Any) -> Optional[tuple[Any, bool]]:
    """LlamaIndex's ToolOutput as OpenLLMetry writes it: (raw output, is_error), else None."""
    obj = _parsed(value, TOOL_OUTPUT)
    if obj is None or "tool_name" not in obj:
        return None
    inner = obj.get("tool_output")
    if not isinstance(inner, dict) or "raw_output" not in inner:
        return None
    return inner["raw_output"], inner.get("is_error") is True


def _tool_message(obj: dict[str, Any]) -> Optional[dict[str, Any]]:
    data = obj.get("data")
    if obj.get("type") == "tool" and isinstance(data, dict) and "tool_call_id" in data:
        return data  # OpenInference
    output = obj.get("output")
    kwargs = output.get("kwargs") if isinstance(output, dict) else None
    if isinstance(kwargs, dict) and "tool_call_id" in kwargs:
        return kwargs  # OpenLLMetry (LangChain serialisation)
    if "tool_call_id" in obj and "content" in obj:
        return obj  # a bare ToolMessage dict
    return None
