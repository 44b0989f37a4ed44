# SPDX-License-Identifier: Apache-2.0
"""A scripted fake of two model providers' APIs for the real coding agents
of tests/integration/test_agents.py: Anthropic Messages (Claude Code) and
OpenAI Responses (Codex CLI), streamed as server-sent events over plain
HTTP. It runs on a test host in the test network namespace
(tests/integration/netlab.py), started by the test:

    python3 agent_provider.py CONFIG_JSON

CONFIG_JSON: {"addr": A, "port": P, "log": PATH, "script": {"anthropic":
[STEP...], "openai": [STEP...]}} (or, per API, {WORD: [STEP...]}: the
steps of the conversation whose first user message contains WORD). A step is {"command": "..."} (the agent's
shell tool), {"tool": NAME, "input": {...}} (Anthropic: any tool by name),
or {"text": "..."} (the final answer: no tool call). Prints "READY" once
listening; ends when its stdin closes.

The script is keyed on the conversation so far: the number of tool results
in the request is the index of the step to answer with, so a retried
request gets the same answer and the agent's own bookkeeping decides
nothing. A request without tools (an agent's side question: a title, a
summary) gets a short text. Every request is logged as one JSON line:
method, path, whether it was the scripted conversation, the step answered,
the tool names offered, and the text of the latest tool result — the test
reads that to see each step's outcome as the agent saw it.
"""

import json
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

cfg = json.loads(sys.argv[1])
SCRIPT = cfg["script"]
lock = threading.Lock()
logf = open(cfg["log"], "a", buffering=1)
RESULT_LOG_LIMIT = 4000  # characters of a tool result kept in the log


def log(rec):
    with lock:
        logf.write(json.dumps(rec, sort_keys=True) + "\n")


def sse(events):
    return b"".join(b"event: %s\ndata: %s\n\n" % (name.encode(), json.dumps(data).encode())
                    for name, data in events)


def text_of(content):
    """A tool result's text, whatever shape the agent sent it in."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(c.get("text", c.get("content", ""))) if isinstance(c, dict)
                         else str(c) for c in content)
    if isinstance(content, dict):
        return text_of(content.get("text", content.get("content", json.dumps(content))))
    return str(content)


def pick(script, messages):
    """The steps of the conversation: a script is one list, or a dict of
    lists keyed by a word of the conversation's first user message (several
    conversations with one server)."""
    if isinstance(script, list):
        return None, script
    first = next((text_of(m.get("content", "")) for m in messages if m.get("role") == "user"),
                 "")
    for word, steps in script.items():
        if word in first:
            return word, steps
    return "", [{"text": "fake provider: no script for this conversation"}]


# ---- Anthropic Messages -----------------------------------------------------

def anthropic_results(body):
    results = []
    for m in body.get("messages", []):
        if isinstance(m.get("content"), list):
            results += [c for c in m["content"]
                        if isinstance(c, dict) and c.get("type") == "tool_result"]
    return results


def anthropic_step(step, n, tools):
    """The content blocks of step n."""
    if "text" in step:
        return [{"type": "text", "text": step["text"]}], "end_turn"
    if "command" in step:
        name, inp = "Bash", {"command": step["command"], "description": f"step {n}"}
    else:
        name, inp = step["tool"], step["input"]
    if name not in tools:
        return [{"type": "text", "text": f"fake provider: no tool {name} offered"}], "end_turn"
    return [{"type": "text", "text": f"Step {n}."},
            {"type": "tool_use", "id": f"toolu_lz{n:02d}", "name": name, "input": inp}], \
        "tool_use"


def anthropic_stream(model, blocks, stop):
    ev = [("message_start", {"type": "message_start", "message": {
        "id": "msg_lz", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})]
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            ev.append(("content_block_start", {"type": "content_block_start", "index": i,
                                               "content_block": {"type": "text", "text": ""}}))
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                               "delta": {"type": "text_delta",
                                                         "text": b["text"]}}))
        else:
            ev.append(("content_block_start", {"type": "content_block_start", "index": i,
                                               "content_block": {**b, "input": {}}}))
            js = json.dumps(b["input"])
            # Two fragments: the agent must join partial JSON as it does for
            # a real model.
            for part in (js[:len(js) // 2], js[len(js) // 2:]):
                ev.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "input_json_delta",
                                                             "partial_json": part}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    ev.append(("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": 20}}))
    ev.append(("message_stop", {"type": "message_stop"}))
    return sse(ev)


def anthropic(handler, body):
    tools = [t.get("name") for t in body.get("tools", []) if isinstance(t, dict)]
    model = body.get("model", "claude-lz")
    rec = {"api": "anthropic", "model": model, "stream": bool(body.get("stream"))}
    if tools:
        results = anthropic_results(body)
        n = len(results)
        word, steps = pick(SCRIPT["anthropic"], body.get("messages", []))
        step = steps[min(n, len(steps) - 1)]
        blocks, stop = anthropic_step(step, n, tools)
        rec.update(conversation=True, step=n, tools=tools, script=word,
                   result=text_of(results[-1].get("content", ""))[:RESULT_LOG_LIMIT]
                   if results else None,
                   is_error=bool(results[-1].get("is_error")) if results else None)
    else:
        blocks, stop = [{"type": "text", "text": "Lazaret test"}], "end_turn"
        rec.update(conversation=False)
    log(rec)
    if body.get("stream"):
        handler.reply(200, anthropic_stream(model, blocks, stop), "text/event-stream")
    else:
        handler.reply(200, json.dumps({
            "id": "msg_lz", "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 20}}).encode(), "application/json")


# ---- OpenAI Responses -------------------------------------------------------

def openai_call(step, n, tools):
    """The function_call item of step n, in the shape of the shell tool the
    agent offered."""
    cmd = step["command"]
    if "shell" in tools:
        name, args = "shell", {"command": ["bash", "-lc", cmd], "timeout_ms": 120000}
    elif "shell_command" in tools:
        name, args = "shell_command", {"command": cmd, "timeout_ms": 120000}
    elif "exec_command" in tools:
        name, args = "exec_command", {"cmd": cmd, "yield_time_ms": 60000}
    else:
        return None
    return {"type": "function_call", "id": f"fc_lz{n:02d}", "call_id": f"call_lz{n:02d}",
            "name": name, "arguments": json.dumps(args), "status": "completed"}


def openai(handler, body):
    tools = [t.get("name") for t in body.get("tools", []) if isinstance(t, dict)]
    items = body.get("input", [])
    results = [i for i in items if isinstance(i, dict) and i.get("type") in (
        "function_call_output", "custom_tool_call_output")]
    n = len(results)
    word, steps = pick(SCRIPT["openai"], [i for i in items if isinstance(i, dict)
                                    and i.get("role") == "user"])
    step = steps[min(n, len(steps) - 1)]
    item = None if "text" in step else openai_call(step, n, tools)
    if item is None:
        text = step.get("text", "fake provider: no shell tool offered")
        item = {"type": "message", "role": "assistant", "id": f"msg_lz{n:02d}",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
    log({"api": "openai", "conversation": bool(tools), "step": n, "tools": tools, "script": word,
         "model": body.get("model"),
         "result": text_of(results[-1].get("output", ""))[:RESULT_LOG_LIMIT] if results
         else None})
    rid = f"resp_lz{n:02d}"
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 30}
    handler.reply(200, sse([
        ("response.created", {"type": "response.created", "sequence_number": 0,
                              "response": {"id": rid, "object": "response",
                                           "status": "in_progress", "output": []}}),
        ("response.output_item.added", {"type": "response.output_item.added",
                                        "sequence_number": 1, "output_index": 0,
                                        "item": {**item, **({"arguments": ""} if "arguments"
                                                            in item else {})}}),
        ("response.output_item.done", {"type": "response.output_item.done",
                                       "sequence_number": 2, "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "sequence_number": 3,
                                "response": {"id": rid, "object": "response",
                                             "status": "completed", "output": [item],
                                             "usage": usage}}),
    ]), "text/event-stream")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, data, ctype):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        enc = self.headers.get("Content-Encoding", "").lower()
        if enc in ("gzip", "deflate"):
            data = zlib.decompress(data, 47)
        return data

    def do_POST(self):
        body_bytes = self.read_body()
        path = self.path.split("?")[0]
        try:
            body = json.loads(body_bytes or b"{}")
        except ValueError:
            log({"method": "POST", "path": path, "error": "not JSON",
                 "encoding": self.headers.get("Content-Encoding")})
            self.reply(400, b'{"error":"not JSON"}', "application/json")
            return
        if path.endswith("/v1/messages/count_tokens"):
            log({"api": "anthropic", "path": path, "conversation": False})
            self.reply(200, b'{"input_tokens": 100}', "application/json")
        elif path.endswith("/v1/messages"):
            anthropic(self, body)
        elif path.endswith("/v1/responses"):
            openai(self, body)
        else:
            log({"method": "POST", "path": path, "unknown": True})
            self.reply(404, b'{"error":{"type":"not_found","message":"fake provider"}}',
                       "application/json")

    def do_GET(self):
        path = self.path.split("?")[0]
        # "/": Claude Code's reachability probe of its base URL.
        known = path == "/" or path.endswith("/models")
        log({"method": self.command, "path": path, "unknown": not known})
        if known:
            self.reply(200, b'{"object":"list","data":[],"models":[]}', "application/json")
        else:
            self.reply(404, b'{"error":{"type":"not_found","message":"fake provider"}}',
                       "application/json")

    do_HEAD = do_GET


server = ThreadingHTTPServer((cfg["addr"], cfg["port"]), Handler)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
print("READY", flush=True)
sys.stdin.read()
