"""A stand-in OpenAI-compatible HTTP server, for the tests that need a server to misbehave on cue
(429, 5xx, slow replies) or to report what it received (headers, request count). The real
llama.cpp servers of the embedded pool cannot be made to return a 429, so these behaviours are
tested against this stand-in; everything else runs against the real pool."""
import json, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StandIn:
    "Scripted replies: `script` is a list of HTTP status codes to return before answering 200."
    def __init__(self, script=(), delay=0.0, reply="The answer is 42."):
        self.script, self.delay, self.reply = list(script), delay, reply
        self.requests, self.lock = [], threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "standin", "object": "model"}]})
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with outer.lock:
                    outer.requests.append(dict(path=self.path, headers={k.lower(): v for k, v in self.headers.items()}, body=body))
                    status = outer.script.pop(0) if outer.script else 200
                if outer.delay: time.sleep(outer.delay)
                if status != 200:
                    auth = self.headers.get("Authorization", "")
                    return self._send(status, {"error": {"message": f"scripted {status} for key {auth}", "type": "standin"}})
                self._send(200, {"id": "c1", "object": "chat.completion", "created": 0, "model": "standin",
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": outer.reply}}],
                                 "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}})
            def _send(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers(); self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.api_base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self): self.thread.start(); return self
    def __exit__(self, *a): self.server.shutdown(); self.server.server_close()
