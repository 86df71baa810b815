"""Compact per-capture view of model and tool spans, in start order: python summarize.py [captures/*.json]"""
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def kind(a):
    k = a.get("openinference.span.kind") or a.get("gen_ai.operation.name") or a.get("traceloop.span.kind")
    if k in ("TOOL", "execute_tool", "tool"):
        return "TOOL"
    if k in ("LLM", "chat", "text_completion"):
        return "MODEL"
    return None


def short(v, n=90):
    s = v if isinstance(v, str) else json.dumps(v)
    return s if len(s) <= n else s[:n] + "..."


def main(paths):
    out = []
    for p in paths:
        d = json.load(open(p))
        m = d["meta"]
        out.append(f"### {os.path.basename(p)}  spans={d['span_count']} import={m.get('import_seconds')}s "
                   f"run={m.get('run_seconds')}s final={m.get('final_output')!r}")
        ids = {}
        for r in d["spans"]:
            k = kind(r["attributes"])
            if not k:
                continue
            a = r["attributes"]
            pid = r["parent_span_id"] or "-"
            ids.setdefault(pid, len(ids))
            if k == "TOOL":
                name = a.get("tool.name") or a.get("gen_ai.tool.name")
                args = a.get("gen_ai.tool.call.arguments", a.get("input.value"))
                res = a.get("gen_ai.tool.call.result", a.get("output.value"))
                cid = a.get("gen_ai.tool.call.id") or a.get("tool_call.id") or a.get("tool.id")
                out.append(f"  TOOL  {r['start_ms']:>8.2f}-{r['end_ms']:<8.2f} parent#{ids[pid]}({r['parent_name']}) "
                           f"{name} status={r['status']['code']} err={a.get('error.type')} ev={[e['name'] for e in r['events']]} "
                           f"call_id={cid} args={short(args)} result={short(res, 60)}")
            else:
                tin = a.get("gen_ai.usage.input_tokens", a.get("llm.token_count.prompt"))
                tout = a.get("gen_ai.usage.output_tokens", a.get("llm.token_count.completion"))
                model = a.get("gen_ai.response.model") or a.get("gen_ai.request.model") or a.get("llm.model_name")
                out.append(f"  MODEL {r['start_ms']:>8.2f}-{r['end_ms']:<8.2f} parent#{ids[pid]}({r['parent_name']}) "
                           f"{r['name']} model={model} tokens={tin}/{tout}")
    return "\n".join(out)


if __name__ == "__main__":
    paths = sys.argv[1:] or sorted(glob.glob(os.path.join(HERE, "captures", "*.json")))
    text = main(paths)
    print(text)
