"""One real LlamaIndex run with the guard wrapping each tool (otel_loopguard.enforce.llamaindex).

Run with .venv-fw, never imported by pytest (test_enforce_wrappers.py runs it):

    .venv-fw/bin/python tests/frameworks/li_enforce_agent.py SCENARIO OUT.pb [openinference|traceloop]

A FunctionAgent (an AgentWorkflow underneath) with LlamaIndex's MockFunctionCallingLLM playing the
script (as research/conventions/li_run.py), no network; OpenInference's LlamaIndex
instrumentation (or OpenLLMetry's: traceloop), install() tagging the spans, the guard enforcing. Scenarios:
enforce_common.SCENARIOS. A request whose last message ends with the wrap-up instruction is
answered "wrap-up: <it>". Prints one JSON line (enforce_common.report).
"""

from __future__ import annotations

import asyncio
import os
import sys

os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-no-network")
os.environ.setdefault("TRACELOOP_TELEMETRY", "false")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enforce_common as ec  # noqa: E402


def main(argv: list) -> int:
    scenario, out_path, instrumentation = ec.arguments(argv, "li_enforce_agent.py", ("openinference", "traceloop"))
    provider, exporter, guard, invoked, requests = ec.setup(scenario, "frameworks-li-key-8Rv3nHs6")
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.llms.llm import ToolSelection
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool

    from otel_loopguard.enforce.llamaindex import guard_tools

    if instrumentation == "traceloop":
        from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor
    else:
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument(tracer_provider=provider)
    script = ec.script(scenario)

    def generator(messages, **kwargs) -> ChatMessage:
        last = str(messages[-1].content or "") if messages else ""
        told = ec.WRAP_UP if last.rstrip().endswith(ec.WRAP_UP) else ""
        returns = [str(m.content) for m in _trailing_tool_messages(messages, MessageRole.TOOL)]
        requests.append({"tools": sorted(t.metadata.get_name() for t in kwargs.get("tools") or []), "told": told,
                         "returns": returns})
        step = f"wrap-up: {ec.WRAP_UP}" if told else ec.step(script, requests)
        if isinstance(step, str):
            return ChatMessage(role=MessageRole.ASSISTANT, content=step)
        calls = [ToolSelection(tool_id=f"c{len(requests)}_{j}", tool_name=n, tool_kwargs=a)
                 for j, (n, a) in enumerate(step)]
        return ChatMessage(role=MessageRole.ASSISTANT, content="", additional_kwargs={"tool_calls": calls})

    def lookup_order(order_id: str) -> str:
        """Look up an order's status."""
        return ec.lookup_order(invoked, order_id)

    def get_shipping(order_id: str) -> str:
        """Look up an order's shipping."""
        return ec.get_shipping(invoked, order_id)

    def flaky_tool(x: int, mode: str) -> str:
        """A tool that always fails."""
        return ec.flaky_tool(invoked, x, mode)

    tools = guard_tools([FunctionTool.from_defaults(fn=f) for f in (lookup_order, get_shipping, flaky_tool)], guard)
    agent = FunctionAgent(name="order_agent", description="Looks up orders.", system_prompt="Look up orders.",
                          tools=tools, llm=MockFunctionCallingLLM(response_generator=generator, is_chat_model=True),
                          streaming=False)

    async def run():
        return await agent.run(user_msg="Where is order A-1?", max_iterations=40)

    result = asyncio.run(run())
    ec.report(provider, exporter, out_path, invoked, requests, str(result.response.content))
    return 0


def _trailing_tool_messages(messages, tool_role) -> list:
    out = []
    for m in reversed(messages):
        if m.role != tool_role:
            break
        out.insert(0, m)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
