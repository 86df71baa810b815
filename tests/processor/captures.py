"""Attribute sets of real tool and model spans, copied verbatim from research/conventions/captures.

Each entry: the capture file, the span name and its index among spans of that name,
the span status, and the attributes exactly as the instrumentation set them.
test_captures.py checks the copies against the capture files while those exist.
Generated once from the captures; edit only by regenerating.
"""

from __future__ import annotations

from typing import Any

CAPTURED: dict[str, dict[str, Any]] = {}

CAPTURED['genai_chat'] = {'file': 'oa_otel_genai__scripted',
 'name': 'chat scripted-model',
 'index': 0,
 'status': 'OK',
 'description': None,
 'attributes': {'gen_ai.provider.name': 'openai',
                'gen_ai.system': 'openai',
                'gen_ai.agent.name': 'OpenAI Agent',
                'gen_ai.agent.id': 'agent',
                'gen_ai.agent.description': 'OpenAI Agents instrumentation',
                'server.address': 'api.openai.com',
                'server.port': 443,
                'gen_ai.operation.name': 'chat',
                'gen_ai.request.model': 'scripted-model',
                'gen_ai.usage.input_tokens': 100,
                'gen_ai.usage.output_tokens': 7,
                'gen_ai.request.temperature': 0,
                'gen_ai.input.messages': '[{"role":"system","parts":[{"type":"text","content":"Look up '
                                         'orders."}]},{"role":"user","parts":[{"type":"text","content":"Where '
                                         'is order A-1?"}]}]',
                'gen_ai.system_instructions': '[{"type":"text","content":"Look up orders."}]',
                'gen_ai.output.messages': '[{"role":"assistant","parts":[{"type":"text","content":"{\'role\': '
                                          "'assistant', 'content': None, 'tool_calls': [{'id': 'call_t1', "
                                          "'type': 'function', 'function': {'name': 'lookup_order', "
                                          '\'arguments\': \'{\\"order_id\\": \\"A-1\\"}\'}}]}"}]}]',
                'gen_ai.output.type': 'text'}}

CAPTURED['genai_tool'] = {'file': 'oa_otel_genai__scripted',
 'name': 'execute_tool lookup_order',
 'index': 0,
 'status': 'OK',
 'description': None,
 'attributes': {'gen_ai.provider.name': 'openai',
                'gen_ai.system': 'openai',
                'gen_ai.agent.name': 'OpenAI Agent',
                'gen_ai.agent.id': 'agent',
                'gen_ai.agent.description': 'OpenAI Agents instrumentation',
                'server.address': 'api.openai.com',
                'server.port': 443,
                'gen_ai.operation.name': 'execute_tool',
                'gen_ai.tool.name': 'lookup_order',
                'gen_ai.tool.type': 'function',
                'gen_ai.tool.call.arguments': '{"order_id": "A-1"}',
                'gen_ai.tool.call.result': 'order A-1: pending',
                'gen_ai.output.type': 'json'}}

CAPTURED['genai_tool_error'] = {'file': 'oa_otel_genai__scripted',
 'name': 'execute_tool flaky_tool',
 'index': 0,
 'status': 'ERROR',
 'description': "Error running tool (non-fatal): {'tool_name': 'flaky_tool', 'error': 'Tool execution "
                "failed. Error details are redacted.'}",
 'attributes': {'gen_ai.provider.name': 'openai',
                'gen_ai.system': 'openai',
                'gen_ai.agent.name': 'OpenAI Agent',
                'gen_ai.agent.id': 'agent',
                'gen_ai.agent.description': 'OpenAI Agents instrumentation',
                'server.address': 'api.openai.com',
                'server.port': 443,
                'gen_ai.operation.name': 'execute_tool',
                'gen_ai.tool.name': 'flaky_tool',
                'gen_ai.tool.type': 'function',
                'gen_ai.tool.call.arguments': '{"x": 1, "mode": "fast"}',
                'gen_ai.tool.call.result': 'An error occurred while running the tool. Please try again.',
                'gen_ai.output.type': 'json'}}

CAPTURED['oi_oa_llm'] = {'file': 'oa_openinference__scripted',
 'name': 'generation',
 'index': 0,
 'status': 'OK',
 'description': None,
 'attributes': {'llm.system': 'openai',
                'llm.model_name': 'scripted-model',
                'llm.invocation_parameters': '{"temperature": 0}',
                'input.value': '[{"role": "system", "content": "Look up orders."}, {"content": "Where is '
                               'order A-1?", "role": "user"}]',
                'input.mime_type': 'application/json',
                'llm.input_messages.0.message.role': 'system',
                'llm.input_messages.0.message.content': 'Look up orders.',
                'llm.input_messages.1.message.role': 'user',
                'llm.input_messages.1.message.content': 'Where is order A-1?',
                'output.value': '[{"role": "assistant", "content": null, "tool_calls": [{"id": "call_t1", '
                                '"type": "function", "function": {"name": "lookup_order", "arguments": '
                                '"{\\"order_id\\": \\"A-1\\"}"}}]}]',
                'output.mime_type': 'application/json',
                'llm.output_messages.0.message.role': 'assistant',
                'llm.output_messages.0.message.tool_calls.0.tool_call.id': 'call_t1',
                'llm.output_messages.0.message.tool_calls.0.tool_call.function.name': 'lookup_order',
                'llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments': '{"order_id": '
                                                                                           '"A-1"}',
                'llm.token_count.prompt': 100,
                'llm.token_count.completion': 7,
                'openinference.span.kind': 'LLM'}}

CAPTURED['oi_oa_tool'] = {'file': 'oa_openinference__scripted',
 'name': 'lookup_order',
 'index': 0,
 'status': 'OK',
 'description': None,
 'attributes': {'tool.name': 'lookup_order',
                'input.value': '{"order_id": "A-1"}',
                'input.mime_type': 'application/json',
                'output.value': 'order A-1: pending',
                'tool.description': "Look up an order's status.",
                'tool.parameters': '{"properties": {"order_id": {"title": "Order Id", "type": "string"}}, '
                                   '"required": ["order_id"], "title": "lookup_order_args", "type": '
                                   '"object", "additionalProperties": false}',
                'openinference.span.kind': 'TOOL'}}

CAPTURED['oi_lc_llm'] = {'file': 'lc_openinference__sync__middleware',
 'name': 'ScriptedChatModel',
 'index': 0,
 'status': 'OK',
 'description': None,
 'attributes': {'input.value': '{"messages": [[{"lc": 1, "type": "constructor", "id": ["langchain", '
                               '"schema", "messages", "SystemMessage"], "kwargs": {"content": "Look up '
                               'orders.", "type": "system"}}, {"lc": 1, "type": "constructor", "id": '
                               '["langchain", "schema", "messages", "HumanMessage"], "kwargs": {"content": '
                               '"Where is order A-1?", "type": "human", "id": '
                               '"ca2976ca-1fff-4f6c-8062-b67136056333"}}]]}',
                'input.mime_type': 'application/json',
                'output.value': '{"generations": [[{"text": "", "generation_info": null, "type": '
                                '"ChatGeneration", "message": {"lc": 1, "type": "constructor", "id": '
                                '["langchain", "schema", "messages", "AIMessage"], "kwargs": {"content": "", '
                                '"response_metadata": {"token_usage": {"prompt_tokens": 100, '
                                '"completion_tokens": 7, "total_tokens": 107}, "model_name": '
                                '"scripted-chat", "finish_reason": "tool_calls"}, "type": "ai", "id": '
                                '"run-msg-0", "tool_calls": [{"name": "lookup_order", "args": {"order_id": '
                                '"A-1"}, "id": "call_t1", "type": "tool_call"}], "usage_metadata": '
                                '{"input_tokens": 100, "output_tokens": 7, "total_tokens": 107}, '
                                '"invalid_tool_calls": []}}}]], "llm_output": {"token_usage": '
                                '{"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107}, '
                                '"model_name": "scripted-chat"}, "run": null, "type": "LLMResult"}',
                'output.mime_type': 'application/json',
                'llm.input_messages.0.message.role': 'system',
                'llm.input_messages.0.message.content': 'Look up orders.',
                'llm.input_messages.1.message.role': 'user',
                'llm.input_messages.1.message.content': 'Where is order A-1?',
                'llm.output_messages.0.message.role': 'assistant',
                'llm.output_messages.0.message.tool_calls.0.tool_call.id': 'call_t1',
                'llm.output_messages.0.message.tool_calls.0.tool_call.function.name': 'lookup_order',
                'llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments': '{"order_id": '
                                                                                           '"A-1"}',
                'llm.invocation_parameters': '{"model_name": "scripted-chat", "_type": "scripted-chat", '
                                             '"stop": null}',
                'llm.provider': 'scriptedchatmodel',
                'llm.model_name': 'scripted-chat',
                'llm.token_count.prompt': 100,
                'llm.token_count.completion': 7,
                'llm.token_count.total': 107,
                'llm.finish_reason': 'tool_calls',
                'metadata': '{"ls_integration": "langchain_chat_model", "lc_agent_name": "order_agent", '
                            '"langgraph_step": 1, "langgraph_node": "model", "langgraph_triggers": '
                            '["branch:to:model"], "langgraph_path": ["__pregel_pull", "model"], '
                            '"langgraph_checkpoint_ns": "model:f6550eac-bee8-5237-6282-92187179e789", '
                            '"checkpoint_ns": "model:f6550eac-bee8-5237-6282-92187179e789", "ls_provider": '
                            '"scriptedchatmodel", "ls_model_type": "chat", "ls_model_name": "scripted-chat", '
                            '"lc_versions": {"langchain-core": "1.8.3", "langchain": "1.5.2"}}',
                'openinference.span.kind': 'LLM'}}

CAPTURED['oi_lc_tool_1'] = {'file': 'lc_openinference__sync__middleware',
 'name': 'lookup_order',
 'index': 0,
 'status': 'OK',
 'description': None,
 'attributes': {'input.value': 'A-1',
                'output.value': '{"type": "tool", "data": {"content": "order A-1: pending", '
                                '"additional_kwargs": {}, "response_metadata": {}, "type": "tool", "name": '
                                '"lookup_order", "id": null, "tool_call_id": "call_t1", "artifact": null, '
                                '"status": "success"}}',
                'output.mime_type': 'application/json',
                'tool.name': 'lookup_order',
                'tool.description': "Look up an order's status.",
                'metadata': '{"ls_integration": "langchain_create_agent", "lc_agent_name": "order_agent", '
                            '"langgraph_step": 2, "langgraph_node": "tools", "langgraph_triggers": '
                            '["__pregel_push"], "langgraph_path": ["__pregel_push", 0, false], '
                            '"langgraph_checkpoint_ns": "tools:79f55264-7b90-c4f7-b685-eff7540898d4", '
                            '"checkpoint_ns": "tools:79f55264-7b90-c4f7-b685-eff7540898d4"}',
                'openinference.span.kind': 'TOOL'}}

CAPTURED['oi_lc_tool_2'] = {'file': 'lc_openinference__sync__middleware',
 'name': 'lookup_order',
 'index': 1,
 'status': 'OK',
 'description': None,
 'attributes': {'input.value': 'A-1',
                'output.value': '{"type": "tool", "data": {"content": "order A-1: pending", '
                                '"additional_kwargs": {}, "response_metadata": {}, "type": "tool", "name": '
                                '"lookup_order", "id": null, "tool_call_id": "call_t2", "artifact": null, '
                                '"status": "success"}}',
                'output.mime_type': 'application/json',
                'tool.name': 'lookup_order',
                'tool.description': "Look up an order's status.",
                'metadata': '{"ls_integration": "langchain_create_agent", "lc_agent_name": "order_agent", '
                            '"langgraph_step": 4, "langgraph_node": "tools", "langgraph_triggers": '
                            '["__pregel_push"], "langgraph_path": ["__pregel_push", 0, false], '
                            '"langgraph_checkpoint_ns": "tools:b73de7fc-c144-301a-78e0-1355415e6bd2", '
                            '"checkpoint_ns": "tools:b73de7fc-c144-301a-78e0-1355415e6bd2"}',
                'openinference.span.kind': 'TOOL'}}

CAPTURED['oi_lc_tool_raise'] = {'file': 'lc_openinference__sync__middleware',
 'name': 'flaky_tool',
 'index': 0,
 'status': 'ERROR',
 'description': "RuntimeError('flaky_tool exploded on x=1')Traceback (most recent call last):\n"
                '\n'
                '\n'
                '  File "<site-packages>/langchain_core/tools/base.py", line 1099, in run\n'
                '    response = context.run(self._run, *tool_args, **tool_kwargs)\n'
                '               ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n'
                '\n'
                '\n'
                '  File "<site-packages>/langchain_core/tools/structured.py", line 152, in _run\n'
                '    return self.func(*args, **kwargs)\n'
                '           ^^^^^^^^^^^^^^^^^^^^^^^^^^\n'
                '\n'
                '\n'
                '  File "research/conventions/lc_run.py", line 128, in flaky_tool\n'
                '    raise RuntimeError(f"flaky_tool exploded on x={x}")\n'
                '\n'
                '\n'
                'RuntimeError: flaky_tool exploded on x=1',
 'attributes': {'input.value': '{"x": 1, "mode": "fast"}',
                'input.mime_type': 'application/json',
                'tool.name': 'flaky_tool',
                'tool.description': 'A tool that always fails.',
                'metadata': '{"ls_integration": "langchain_create_agent", "lc_agent_name": "order_agent", '
                            '"langgraph_step": 10, "langgraph_node": "tools", "langgraph_triggers": '
                            '["__pregel_push"], "langgraph_path": ["__pregel_push", 0, false], '
                            '"langgraph_checkpoint_ns": "tools:f8a82538-45c9-b43a-11b7-825c46db0b11", '
                            '"checkpoint_ns": "tools:f8a82538-45c9-b43a-11b7-825c46db0b11"}',
                'openinference.span.kind': 'TOOL'}}

CAPTURED['oi_lc_tool_toolexception'] = {'file': 'lc_openinference__sync__toolexception',
 'name': 'flaky_tool',
 'index': 0,
 'status': 'OK',
 'description': None,
 'attributes': {'input.value': '{"x": 1, "mode": "fast"}',
                'input.mime_type': 'application/json',
                'output.value': '{"type": "tool", "data": {"content": "flaky_tool exploded on x=1", '
                                '"additional_kwargs": {}, "response_metadata": {}, "type": "tool", "name": '
                                '"flaky_tool", "id": null, "tool_call_id": "call_t5", "artifact": null, '
                                '"status": "error"}}',
                'output.mime_type': 'application/json',
                'tool.name': 'flaky_tool',
                'tool.description': 'A tool that always fails.',
                'metadata': '{"ls_integration": "langchain_create_agent", "lc_agent_name": "order_agent", '
                            '"langgraph_step": 10, "langgraph_node": "tools", "langgraph_triggers": '
                            '["__pregel_push"], "langgraph_path": ["__pregel_push", 0, false], '
                            '"langgraph_checkpoint_ns": "tools:773c31ee-a143-ce5c-2467-f0bfe7e5cf64", '
                            '"checkpoint_ns": "tools:773c31ee-a143-ce5c-2467-f0bfe7e5cf64"}',
                'openinference.span.kind': 'TOOL'}}

CAPTURED['tl_lc_chat'] = {'file': 'lc_traceloop__sync__middleware',
 'name': 'ScriptedChatModel.chat',
 'index': 0,
 'status': 'UNSET',
 'description': None,
 'attributes': {'traceloop.workflow.name': 'order_agent',
                'traceloop.entity.path': 'model',
                'traceloop.association.properties.ls_integration': 'langchain_chat_model',
                'traceloop.association.properties.lc_agent_name': 'order_agent',
                'traceloop.association.properties.langgraph_step': 3,
                'traceloop.association.properties.langgraph_node': 'model',
                'traceloop.association.properties.langgraph_triggers': ['branch:to:model'],
                'traceloop.association.properties.langgraph_path': ['__pregel_pull', 'model'],
                'traceloop.association.properties.langgraph_checkpoint_ns': 'model:991d0d2b-5ef5-3144-72b2-340d6473fe35',
                'traceloop.association.properties.checkpoint_ns': 'model:991d0d2b-5ef5-3144-72b2-340d6473fe35',
                'traceloop.association.properties.ls_provider': 'scriptedchatmodel',
                'traceloop.association.properties.ls_model_type': 'chat',
                'traceloop.association.properties.ls_model_name': 'scripted-chat',
                'traceloop.association.properties.lc_versions': '{"langchain-core": "1.8.3", "langchain": '
                                                                '"1.5.2"}',
                'gen_ai.provider.name': 'langchain',
                'gen_ai.operation.name': 'chat',
                'gen_ai.request.model': 'unknown',
                'gen_ai.system_instructions': '[{"type": "text", "content": "Look up orders."}]',
                'gen_ai.input.messages': '[{"role": "user", "parts": [{"type": "text", "content": "Where is '
                                         'order A-1?"}]}]',
                'gen_ai.response.model': 'scripted-chat',
                'gen_ai.usage.input_tokens': 100,
                'gen_ai.usage.output_tokens': 7,
                'gen_ai.usage.total_tokens': 107,
                'gen_ai.output.messages': '[{"role": "assistant", "parts": [{"type": "tool_call", "id": '
                                          '"call_t1", "name": "lookup_order", "arguments": {"order_id": '
                                          '"A-1"}}], "finish_reason": ""}]'}}

CAPTURED['tl_lc_tool_1'] = {'file': 'lc_traceloop__sync__middleware',
 'name': 'execute_tool lookup_order',
 'index': 0,
 'status': 'UNSET',
 'description': None,
 'attributes': {'traceloop.workflow.name': 'order_agent',
                'traceloop.entity.path': 'tools',
                'traceloop.association.properties.ls_integration': 'langchain_create_agent',
                'traceloop.association.properties.lc_agent_name': 'order_agent',
                'traceloop.association.properties.langgraph_step': 5,
                'traceloop.association.properties.langgraph_node': 'tools',
                'traceloop.association.properties.langgraph_triggers': ['__pregel_push'],
                'traceloop.association.properties.langgraph_path': ['__pregel_push', '0', 'False'],
                'traceloop.association.properties.langgraph_checkpoint_ns': 'tools:29744ece-f77f-1f63-da3f-ddfedf229a20',
                'traceloop.association.properties.checkpoint_ns': 'tools:29744ece-f77f-1f63-da3f-ddfedf229a20',
                'traceloop.span.kind': 'tool',
                'traceloop.entity.name': 'lookup_order',
                'gen_ai.provider.name': 'langgraph',
                'gen_ai.operation.name': 'execute_tool',
                'gen_ai.tool.name': 'lookup_order',
                'gen_ai.tool.type': 'function',
                'gen_ai.tool.description': "Look up an order's status.",
                'traceloop.entity.input': '{"input_str": "{\'order_id\': \'A-1\'}", "tags": ["seq:step:1"], '
                                          '"metadata": {"ls_integration": "langchain_create_agent", '
                                          '"lc_agent_name": "order_agent", "langgraph_step": 5, '
                                          '"langgraph_node": "tools", "langgraph_triggers": '
                                          '["__pregel_push"], "langgraph_path": ["__pregel_push", 0, false], '
                                          '"langgraph_checkpoint_ns": '
                                          '"tools:29744ece-f77f-1f63-da3f-ddfedf229a20", "checkpoint_ns": '
                                          '"tools:29744ece-f77f-1f63-da3f-ddfedf229a20"}, "inputs": '
                                          '{"order_id": "A-1"}, "kwargs": {"color": "green", "name": null, '
                                          '"tool_call_id": "call_t1"}}',
                'gen_ai.tool.call.arguments': '{"input_str": "{\'order_id\': \'A-1\'}", "tags": '
                                              '["seq:step:1"], "metadata": {"ls_integration": '
                                              '"langchain_create_agent", "lc_agent_name": "order_agent", '
                                              '"langgraph_step": 5, "langgraph_node": "tools", '
                                              '"langgraph_triggers": ["__pregel_push"], "langgraph_path": '
                                              '["__pregel_push", 0, false], "langgraph_checkpoint_ns": '
                                              '"tools:29744ece-f77f-1f63-da3f-ddfedf229a20", '
                                              '"checkpoint_ns": '
                                              '"tools:29744ece-f77f-1f63-da3f-ddfedf229a20"}, "inputs": '
                                              '{"order_id": "A-1"}, "kwargs": {"color": "green", "name": '
                                              'null, "tool_call_id": "call_t1"}}',
                'gen_ai.task.status': 'success',
                'traceloop.entity.output': '{"output": {"lc": 1, "type": "constructor", "id": ["langchain", '
                                           '"schema", "messages", "ToolMessage"], "kwargs": {"content": '
                                           '"order A-1: pending", "type": "tool", "name": "lookup_order", '
                                           '"tool_call_id": "call_t1", "status": "success"}}, "kwargs": '
                                           '{"tags": ["seq:step:1"], "color": "green", "name": '
                                           '"lookup_order"}}',
                'gen_ai.tool.call.result': '{"output": {"lc": 1, "type": "constructor", "id": ["langchain", '
                                           '"schema", "messages", "ToolMessage"], "kwargs": {"content": '
                                           '"order A-1: pending", "type": "tool", "name": "lookup_order", '
                                           '"tool_call_id": "call_t1", "status": "success"}}, "kwargs": '
                                           '{"tags": ["seq:step:1"], "color": "green", "name": '
                                           '"lookup_order"}}'}}

CAPTURED['tl_lc_tool_2'] = {'file': 'lc_traceloop__sync__middleware',
 'name': 'execute_tool lookup_order',
 'index': 1,
 'status': 'UNSET',
 'description': None,
 'attributes': {'traceloop.workflow.name': 'order_agent',
                'traceloop.entity.path': 'tools',
                'traceloop.association.properties.ls_integration': 'langchain_create_agent',
                'traceloop.association.properties.lc_agent_name': 'order_agent',
                'traceloop.association.properties.langgraph_step': 9,
                'traceloop.association.properties.langgraph_node': 'tools',
                'traceloop.association.properties.langgraph_triggers': ['__pregel_push'],
                'traceloop.association.properties.langgraph_path': ['__pregel_push', '0', 'False'],
                'traceloop.association.properties.langgraph_checkpoint_ns': 'tools:c02480e3-d9c1-4f91-1f14-1496a4f57dff',
                'traceloop.association.properties.checkpoint_ns': 'tools:c02480e3-d9c1-4f91-1f14-1496a4f57dff',
                'traceloop.span.kind': 'tool',
                'traceloop.entity.name': 'lookup_order',
                'gen_ai.provider.name': 'langgraph',
                'gen_ai.operation.name': 'execute_tool',
                'gen_ai.tool.name': 'lookup_order',
                'gen_ai.tool.type': 'function',
                'gen_ai.tool.description': "Look up an order's status.",
                'traceloop.entity.input': '{"input_str": "{\'order_id\': \'A-1\'}", "tags": ["seq:step:1"], '
                                          '"metadata": {"ls_integration": "langchain_create_agent", '
                                          '"lc_agent_name": "order_agent", "langgraph_step": 9, '
                                          '"langgraph_node": "tools", "langgraph_triggers": '
                                          '["__pregel_push"], "langgraph_path": ["__pregel_push", 0, false], '
                                          '"langgraph_checkpoint_ns": '
                                          '"tools:c02480e3-d9c1-4f91-1f14-1496a4f57dff", "checkpoint_ns": '
                                          '"tools:c02480e3-d9c1-4f91-1f14-1496a4f57dff"}, "inputs": '
                                          '{"order_id": "A-1"}, "kwargs": {"color": "green", "name": null, '
                                          '"tool_call_id": "call_t2"}}',
                'gen_ai.tool.call.arguments': '{"input_str": "{\'order_id\': \'A-1\'}", "tags": '
                                              '["seq:step:1"], "metadata": {"ls_integration": '
                                              '"langchain_create_agent", "lc_agent_name": "order_agent", '
                                              '"langgraph_step": 9, "langgraph_node": "tools", '
                                              '"langgraph_triggers": ["__pregel_push"], "langgraph_path": '
                                              '["__pregel_push", 0, false], "langgraph_checkpoint_ns": '
                                              '"tools:c02480e3-d9c1-4f91-1f14-1496a4f57dff", '
                                              '"checkpoint_ns": '
                                              '"tools:c02480e3-d9c1-4f91-1f14-1496a4f57dff"}, "inputs": '
                                              '{"order_id": "A-1"}, "kwargs": {"color": "green", "name": '
                                              'null, "tool_call_id": "call_t2"}}',
                'gen_ai.task.status': 'success',
                'traceloop.entity.output': '{"output": {"lc": 1, "type": "constructor", "id": ["langchain", '
                                           '"schema", "messages", "ToolMessage"], "kwargs": {"content": '
                                           '"order A-1: pending", "type": "tool", "name": "lookup_order", '
                                           '"tool_call_id": "call_t2", "status": "success"}}, "kwargs": '
                                           '{"tags": ["seq:step:1"], "color": "green", "name": '
                                           '"lookup_order"}}',
                'gen_ai.tool.call.result': '{"output": {"lc": 1, "type": "constructor", "id": ["langchain", '
                                           '"schema", "messages", "ToolMessage"], "kwargs": {"content": '
                                           '"order A-1: pending", "type": "tool", "name": "lookup_order", '
                                           '"tool_call_id": "call_t2", "status": "success"}}, "kwargs": '
                                           '{"tags": ["seq:step:1"], "color": "green", "name": '
                                           '"lookup_order"}}'}}

CAPTURED['tl_lc_tool_toolexception'] = {'file': 'lc_traceloop__sync__toolexception',
 'name': 'execute_tool flaky_tool',
 'index': 0,
 'status': 'UNSET',
 'description': None,
 'attributes': {'traceloop.workflow.name': 'order_agent',
                'traceloop.entity.path': 'tools',
                'traceloop.association.properties.ls_integration': 'langchain_create_agent',
                'traceloop.association.properties.lc_agent_name': 'order_agent',
                'traceloop.association.properties.langgraph_step': 10,
                'traceloop.association.properties.langgraph_node': 'tools',
                'traceloop.association.properties.langgraph_triggers': ['__pregel_push'],
                'traceloop.association.properties.langgraph_path': ['__pregel_push', '0', 'False'],
                'traceloop.association.properties.langgraph_checkpoint_ns': 'tools:7fceb905-d13e-b680-69fb-41efc025ac0c',
                'traceloop.association.properties.checkpoint_ns': 'tools:7fceb905-d13e-b680-69fb-41efc025ac0c',
                'traceloop.span.kind': 'tool',
                'traceloop.entity.name': 'flaky_tool',
                'gen_ai.provider.name': 'langgraph',
                'gen_ai.operation.name': 'execute_tool',
                'gen_ai.tool.name': 'flaky_tool',
                'gen_ai.tool.type': 'function',
                'gen_ai.tool.description': 'A tool that always fails.',
                'traceloop.entity.input': '{"input_str": "{\'x\': 1, \'mode\': \'fast\'}", "tags": '
                                          '["seq:step:1"], "metadata": {"ls_integration": '
                                          '"langchain_create_agent", "lc_agent_name": "order_agent", '
                                          '"langgraph_step": 10, "langgraph_node": "tools", '
                                          '"langgraph_triggers": ["__pregel_push"], "langgraph_path": '
                                          '["__pregel_push", 0, false], "langgraph_checkpoint_ns": '
                                          '"tools:7fceb905-d13e-b680-69fb-41efc025ac0c", "checkpoint_ns": '
                                          '"tools:7fceb905-d13e-b680-69fb-41efc025ac0c"}, "inputs": {"x": 1, '
                                          '"mode": "fast"}, "kwargs": {"color": "green", "name": null, '
                                          '"tool_call_id": "call_t5"}}',
                'gen_ai.tool.call.arguments': '{"input_str": "{\'x\': 1, \'mode\': \'fast\'}", "tags": '
                                              '["seq:step:1"], "metadata": {"ls_integration": '
                                              '"langchain_create_agent", "lc_agent_name": "order_agent", '
                                              '"langgraph_step": 10, "langgraph_node": "tools", '
                                              '"langgraph_triggers": ["__pregel_push"], "langgraph_path": '
                                              '["__pregel_push", 0, false], "langgraph_checkpoint_ns": '
                                              '"tools:7fceb905-d13e-b680-69fb-41efc025ac0c", '
                                              '"checkpoint_ns": '
                                              '"tools:7fceb905-d13e-b680-69fb-41efc025ac0c"}, "inputs": '
                                              '{"x": 1, "mode": "fast"}, "kwargs": {"color": "green", '
                                              '"name": null, "tool_call_id": "call_t5"}}',
                'gen_ai.task.status': 'success',
                'traceloop.entity.output': '{"output": {"lc": 1, "type": "constructor", "id": ["langchain", '
                                           '"schema", "messages", "ToolMessage"], "kwargs": {"content": '
                                           '"flaky_tool exploded on x=1", "type": "tool", "name": '
                                           '"flaky_tool", "tool_call_id": "call_t5", "status": "error"}}, '
                                           '"kwargs": {"tags": ["seq:step:1"], "color": "green", "name": '
                                           '"flaky_tool"}}',
                'gen_ai.tool.call.result': '{"output": {"lc": 1, "type": "constructor", "id": ["langchain", '
                                           '"schema", "messages", "ToolMessage"], "kwargs": {"content": '
                                           '"flaky_tool exploded on x=1", "type": "tool", "name": '
                                           '"flaky_tool", "tool_call_id": "call_t5", "status": "error"}}, '
                                           '"kwargs": {"tags": ["seq:step:1"], "color": "green", "name": '
                                           '"flaky_tool"}}'}}

CAPTURED['tl_oa_chat'] = {'file': 'oa_traceloop__scripted',
 'name': 'openai.response',
 'index': 0,
 'status': 'OK',
 'description': None,
 'attributes': {'gen_ai.operation.name': 'chat',
                'gen_ai.provider.name': 'openai',
                'gen_ai.request.model': 'scripted-model',
                'gen_ai.input.messages': '[{"role": "system", "parts": [{"type": "text", "content": "Look up '
                                         'orders."}]}, {"role": "user", "parts": [{"type": "text", '
                                         '"content": "Where is order A-1?"}]}]'}}

CAPTURED['tl_oa_tool'] = {'file': 'oa_traceloop__scripted',
 'name': 'lookup_order.tool',
 'index': 0,
 'status': 'OK',
 'description': None,
 'attributes': {'traceloop.span.kind': 'tool',
                'gen_ai.tool.name': 'lookup_order',
                'gen_ai.tool.type': 'function',
                'gen_ai.provider.name': 'openai',
                'gen_ai.operation.name': 'execute_tool',
                'gen_ai.tool.call.arguments': '{"order_id": "A-1"}',
                'gen_ai.tool.call.result': 'order A-1: pending'}}
