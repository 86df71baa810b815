"""smolagents ToolCallingAgent + OpenInference's SmolagentsInstrumentor, scripted Model, no network.
smolagents has no OTel output of its own; OpenInference is the instrumentation its docs name.

Usage: python smol_run.py --scenario NAME [--agent {tools,code}] [--content {default,off}] [--out NAME]

--agent tools (default): ToolCallingAgent (JSON tool calls).
--agent code:            CodeAgent, smolagents' default agent: the model writes Python in <code> tags
                         that calls the tools (a turn's calls in one code block, one after the other)
                         and ends with final_answer("done") in code. Base scenarios only.

The agent ends a run by calling its `final_answer` tool ({"answer": "done"}): that is a tool span
too, so every label counts one call more than the scenario's own.

Scenarios: fw_common.SCENARIOS (in `errors` flaky_tool raises; smolagents turns the exception into
an AgentToolExecutionError in the step's memory and the run goes on), plus
  delegate      managed agent: the manager calls the managed agent `specialist` (a tool-call named
                after it, {"task": ...}) 4 times with the same task; the specialist calls
                lookup_order(A-1), then final_answer
  delegate-ok   one delegation

Model spans: OpenInference wraps `generate` of every Model class smolagents exports at instrument
time. A user's own Model subclass that overrides `generate` is not one of them and gets **no LLM
span**; this script exports its scripted class into the `smolagents` namespace before instrumenting
so that its calls are traced as a built-in model's would be (see FINDINGS.md).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("HF_TOKEN", "dummy-no-network")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import fw_common as fw  # noqa: E402

FINAL = "final_answer"
EXTRA = {
    "delegate": ([[(f"c{i}", "specialist", {"task": "status of A-1?"})] for i in range(1, 5)] + ["done"],
                 {"tool_calls": 13, "errors": 0, "must": ["cycle/stop"], "quiet": False,
                  "note": "4 x (specialist, sub-agent lookup_order, sub-agent final_answer) + final_answer"}),
    "delegate-ok": ([[("c1", "specialist", {"task": "status of A-1?"})], "done"],
                    {"tool_calls": 4, "errors": 0, "must": [], "quiet": True}),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instr", default="openinference", choices=["openinference"])
    ap.add_argument("--scenario", required=True, choices=list(fw.SCENARIOS) + list(EXTRA))
    ap.add_argument("--agent", default="tools", choices=["tools", "code"])
    ap.add_argument("--content", default="default", choices=["default", "off"],
                    help="off: the instrumentation's content switch (fw_common.CONTENT_OFF_ENV)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.content == "off":
        fw.content_off("openinference")
    if args.scenario in EXTRA:
        turns, expected = EXTRA[args.scenario]
    else:
        turns, expected = fw.SCENARIOS[args.scenario], dict(fw.EXPECTED[args.scenario])
        expected["tool_calls"] += 1
        expected["note"] = "+1: the final_answer tool call"

    provider, exporter, recorder = fw.setup()
    with common.Timer() as t_import:
        import smolagents
        from smolagents import CodeAgent, Model, ToolCallingAgent, tool
        from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole
        from smolagents.monitoring import TokenUsage

    script = fw.Script(turns)
    sub_ids = {"n": 0}

    def message(step, tin, tout, prefix="") -> ChatMessage:
        if isinstance(step, str):
            sub_ids["n"] += 1
            step = [(f"{prefix}final_{sub_ids['n']}", FINAL, {"answer": step})]
        calls = [ChatMessageToolCall(id=c, type="function", function=ChatMessageToolCallFunction(name=n, arguments=a))
                 for c, n, a in step]
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=calls,
                           token_usage=TokenUsage(input_tokens=tin, output_tokens=tout))

    def code_message(step, tin, tout) -> ChatMessage:
        if isinstance(step, str):
            code = f"final_answer({step!r})"
        else:
            code = "\n".join(f"r{k} = {n}({', '.join(f'{a}={v!r}' for a, v in args.items())})\nprint(r{k})"
                             for k, (c, n, args) in enumerate(step))
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Thought: next step.\n<code>\n{code}\n</code>",
                           token_usage=TokenUsage(input_tokens=tin, output_tokens=tout))

    class ScriptedModel(Model):
        def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kw):
            i, step, (tin, tout) = script.next()
            if args.agent == "code":
                return code_message(step, tin, tout)
            return message(step, tin, tout)

    class SpecialistModel(Model):
        """lookup_order(A-1) first, final_answer once an observation is in the memory."""

        def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kw):
            seen = any("order A-1: pending" in str(getattr(m, "content", m)) for m in messages)
            if seen:
                return message("A-1 is pending", 50, 5, prefix="s")
            sub_ids["n"] += 1
            return message([(f"s{sub_ids['n']}", "lookup_order", fw.A1)], 50, 5)

    # export the scripted classes as a built-in model would be (see the docstring)
    smolagents.ScriptedModel = ScriptedModel
    smolagents.SpecialistModel = SpecialistModel
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    SmolagentsInstrumentor().instrument(tracer_provider=provider)
    pkgs = ["smolagents", "openinference-instrumentation-smolagents", "openinference-instrumentation",
            "openinference-semantic-conventions"]

    @tool
    def lookup_order(order_id: str) -> str:
        """Look up an order's status.

        Args:
            order_id: the order
        """
        recorder.probe("lookup_order")
        return fw.lookup_order(order_id)

    @tool
    def get_shipping(order_id: str) -> str:
        """Look up an order's shipping.

        Args:
            order_id: the order
        """
        recorder.probe("get_shipping")
        return fw.get_shipping(order_id)

    @tool
    def flaky_tool(x: int, mode: str) -> str:
        """A tool that always fails.

        Args:
            x: a number
            mode: a mode
        """
        recorder.probe("flaky_tool")
        return fw.flaky(x, mode)

    managed = []
    if args.scenario.startswith("delegate"):
        managed = [ToolCallingAgent(tools=[lookup_order], model=SpecialistModel(model_id="specialist-model"),
                                    name="specialist", description="Answers order questions.", max_steps=5,
                                    verbosity_level=0)]
    cls = CodeAgent if args.agent == "code" else ToolCallingAgent
    agent = cls(tools=[lookup_order, get_shipping, flaky_tool], model=ScriptedModel(model_id="scripted-model"),
                managed_agents=managed, max_steps=20, verbosity_level=0, name="order_agent")

    with common.Timer() as t_run:
        outcome, final = fw.run_guarded(lambda: agent.run("Where is order A-1?"))
    name = args.out or fw.out_name(f"smol{'_code' if args.agent == 'code' else ''}_openinference__{args.scenario}",
                                     args.content)
    fw.finish(name, provider, exporter, recorder, scenario=args.scenario, turns=turns, expected=expected,
              versions=pkgs, outcome=outcome, final=final, t_import=t_import, t_run=t_run)


if __name__ == "__main__":
    main()
