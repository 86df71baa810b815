"""One real smolagents run with the guard wrapping each tool (otel_loopguard.enforce.smolagents).

Run with .venv-fw, never imported by pytest (test_enforce_wrappers.py runs it):

    .venv-fw/bin/python tests/frameworks/smol_enforce_agent.py SCENARIO OUT.pb [tools|code|code_tools]

A ToolCallingAgent under `guard_agent` (`code`: a CodeAgent under `guard_agent`, whose code makes
a turn's calls one after the other; `code_tools`: a CodeAgent made with `guard_tools`, no turns)
with a scripted Model, no network; OpenInference's
smolagents instrumentation, install() tagging the spans, the guard enforcing. Scenarios:
enforce_common.SCENARIOS. A request whose last observation ends with the wrap-up instruction
is answered with final_answer("wrap-up: <it>"). Prints one JSON line (enforce_common.report).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_TOKEN", "dummy-no-network")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import enforce_common as ec  # noqa: E402


def _text(message) -> str:
    content = message.content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


def main(argv: list) -> int:
    kind = argv.pop() if len(argv) == 3 else "tools"
    scenario, out_path, _ = ec.arguments(argv, "smol_enforce_agent.py")
    provider, exporter, guard, invoked, requests = ec.setup(scenario, "frameworks-smol-key-2Wd9pKx4")
    import smolagents
    from smolagents import CodeAgent, Model, ToolCallingAgent, tool
    from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole
    from smolagents.monitoring import TokenUsage

    from otel_loopguard.enforce.smolagents import guard_agent, guard_tools

    script = ec.script(scenario)

    def tool_calls(calls: list) -> ChatMessage:
        return ChatMessage(role=MessageRole.ASSISTANT, content="", token_usage=TokenUsage(50, 5), tool_calls=[
            ChatMessageToolCall(id=f"c{len(requests)}_{j}", type="function",
                                function=ChatMessageToolCallFunction(name=n, arguments=a))
            for j, (n, a) in enumerate(calls)])

    def code(calls: list) -> ChatMessage:
        lines = [f"print({n}(**{a!r}))" if n != "final_answer" else f"final_answer({a['answer']!r})"
                 for n, a in calls]
        text = "Thought: next.\n<code>\n" + "\n".join(lines) + "\n</code>"
        return ChatMessage(role=MessageRole.ASSISTANT, content=text, token_usage=TokenUsage(50, 5))

    class ScriptedModel(Model):
        def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kw):
            last = _text(messages[-1]) if messages else ""
            told = ec.WRAP_UP if ec.WRAP_UP in last else ""  # CodeAgent: before its "Last output" line
            observed = requests and messages[-1].role in (MessageRole.TOOL_RESPONSE, MessageRole.USER)
            returns = [last.strip().removeprefix("Observation:").strip()] if observed else []
            requests.append({"tools": sorted(t.name for t in tools_to_call_from or []), "told": told,
                             "returns": returns})
            step = f"wrap-up: {ec.WRAP_UP}" if told else ec.step(script, requests)
            calls = [("final_answer", {"answer": step})] if isinstance(step, str) else step
            return code(calls) if kind.startswith("code") else tool_calls(calls)

    smolagents.ScriptedModel = ScriptedModel  # traced as a built-in model (research/conventions/smol_run.py)
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    SmolagentsInstrumentor().instrument(tracer_provider=provider)

    @tool
    def lookup_order(order_id: str) -> str:
        """Look up an order's status.

        Args:
            order_id: the order
        """
        return ec.lookup_order(invoked, order_id)

    @tool
    def get_shipping(order_id: str) -> str:
        """Look up an order's shipping.

        Args:
            order_id: the order
        """
        return ec.get_shipping(invoked, order_id)

    @tool
    def flaky_tool(x: int, mode: str) -> str:
        """A tool that always fails.

        Args:
            x: a number
            mode: a mode
        """
        return ec.flaky_tool(invoked, x, mode)

    cls = CodeAgent if kind.startswith("code") else ToolCallingAgent
    tools = [lookup_order, get_shipping, flaky_tool]
    if kind == "code_tools":  # the tools wrapped before the agent is made (no turns)
        agent = cls(tools=guard_tools(tools, guard), model=ScriptedModel(model_id="scripted-model"), max_steps=20,
                    verbosity_level=0, name="order_agent")
    else:  # the agent's tools wrapped in place, each call's turn its step
        agent = guard_agent(cls(tools=tools, model=ScriptedModel(model_id="scripted-model"), max_steps=20,
                                verbosity_level=0, name="order_agent"), guard)
    final = agent.run("Where is order A-1?")
    ec.report(provider, exporter, out_path, invoked, requests, str(final))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
