"""Traces as an independent OTLP receiver decodes them: the official
`opentelemetry-proto` package (PyPI) parses what `host run --otlp-endpoint` exports.

    python check.py HOST WEBFETCH.wasm WORDCOUNT.wasm

Starts, on 127.0.0.1: an OTLP/HTTP receiver (POST /v1/traces, protobuf) and a web server
that records each request's `traceparent`; runs `host run` with the webfetch plugin
allowed to reach that server and the receiver as its collector; makes one `tools/call`
with `_meta.traceparent`; closes the input (the host flushes its spans as it ends); then
checks the decoded span tree: the SERVER span `tools/call fetch` in the client's trace
with the client's span as parent and the MCP/GenAI attributes, its `execute_tool fetch`
child, the service name, and that the request behind the plugin carried the same trace
with an exported span as parent; the arguments' check span `tool.arguments.check`
(passed) under the SERVER span and before the handler's; a call refused by the check
(its span `invalid_arguments`, no handler span); the request's CLIENT span (method, server.address,
status, url.full without the query) under the guest call's span `plugin.call fetch`;
and a wordcount call's `files.read` span (path, bytes) under `plugin.call wordcount`.
Prints one line per check; exits 1 on the first failure.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"

exports = []
seen_traceparents = []


class Collector(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(min(length, 16 << 20))
        if self.path == "/v1/traces" and self.headers.get("Content-Type") == "application/x-protobuf":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            exports.append(request)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            try:
                self.wfile.write(answer)
            except ConnectionResetError:
                pass  # the exporter reads the status line only, then closes
        else:
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def log_message(self, *args):
        pass


class Origin(BaseHTTPRequestHandler):
    def do_GET(self):
        seen_traceparents.append(self.headers.get("traceparent", ""))
        body = b"hello"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def check(what, ok, detail=""):
    if not ok:
        print(f"otlp-check: FAILED: {what} {detail}", file=sys.stderr)
        sys.exit(1)
    print(f"otlp-check: ok   {what}")


def attributes(span):
    out = {}
    for kv in span.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        out[kv.key] = getattr(value, kind) if kind else None
    return out


def main(host, webfetch, wordcount):
    collector, collector_url = serve(Collector)
    origin, origin_url = serve(Origin)
    work = tempfile.mkdtemp()
    try:
        plugins = os.path.join(work, "plugins")
        os.mkdir(plugins)
        shutil.copy(webfetch, os.path.join(plugins, "webfetch.wasm"))
        with open(os.path.join(plugins, "webfetch.toml"), "w") as f:
            f.write(f'[grants]\nhttp = ["{origin_url}"]\n')
        shutil.copy(wordcount, os.path.join(plugins, "wordcount.wasm"))
        with open(os.path.join(plugins, "wordcount.toml"), "w") as f:
            f.write('[grants]\nfiles = "read"\n')
        root = os.path.join(work, "root")
        os.makedirs(os.path.join(root, "notes"))
        with open(os.path.join(root, "notes", "todo.md"), "w") as f:
            f.write("one two\nthree\n")
        lines = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "otlp-check", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "fetch", "arguments": {"url": f"{origin_url}/page?secret=s3cr3t"},
                        "_meta": {"traceparent": TRACEPARENT}}},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
             "params": {"name": "wordcount", "arguments": {"path": "notes/todo.md"},
                        "_meta": {"traceparent": TRACEPARENT}}},
            # Refused by the arguments' check: wordcount requires `path`.
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
             "params": {"name": "wordcount", "arguments": {"secret": "s3cr3t"},
                        "_meta": {"traceparent": TRACEPARENT}}},
        ]
        env = dict(os.environ, OTEL_SERVICE_NAME="otlp-check",
                   OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test")
        done = subprocess.run(
            [host, "run", "--no-builtins", "--plugins", plugins,
             "--cache-dir", os.path.join(work, "cache"),
             "--plugin-http", origin_url, "--plugin-http-allow-net", "127.0.0.1",
             "--plugin-files", "read", "--root", root,
             "--otlp-endpoint", collector_url],
            input="".join(json.dumps(line) + "\n" for line in lines),
            capture_output=True, text=True, timeout=120, env=env,
        )
        check("host run ended cleanly", done.returncode == 0, done.stderr[-2000:])
        answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        call = next((a for a in answers if a.get("id") == 2), None)
        check("the fetch answered", call is not None and call["result"]["isError"] is False,
              json.dumps(call)[:500])
        counted = next((a for a in answers if a.get("id") == 3), None)
        check("the wordcount answered",
              counted is not None and counted["result"]["isError"] is False,
              json.dumps(counted)[:500])
        refused = next((a for a in answers if a.get("id") == 4), None)
        check("the wordcount without a path was refused",
              refused is not None and refused["result"]["isError"] is True,
              json.dumps(refused)[:500])
    finally:
        collector.shutdown()
        origin.shutdown()
        shutil.rmtree(work, ignore_errors=True)

    spans = []
    services = set()
    for request in exports:
        for resource_spans in request.resource_spans:
            resource = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
            services.add(resource.get("service.name"))
            check("the resource carries OTEL_RESOURCE_ATTRIBUTES",
                  resource.get("deployment.environment") == "test", str(resource))
            for scope_spans in resource_spans.scope_spans:
                spans.extend(scope_spans.spans)
    check("the service name is OTEL_SERVICE_NAME", services == {"otlp-check"}, str(services))
    by_name = {span.name: span for span in spans}
    by_id = {span.span_id: span for span in spans}
    checks = [span for span in spans if span.name == "tool.arguments.check"]
    server = by_name.get("tools/call fetch")
    check("one SERVER span tools/call fetch",
          server is not None and server.kind == Span.SPAN_KIND_SERVER,
          str([(s.name, s.kind) for s in spans]))
    check("in the client's trace", server.trace_id.hex() == CLIENT_TRACE, server.trace_id.hex())
    check("with the client's span as parent", server.parent_span_id.hex() == CLIENT_SPAN,
          server.parent_span_id.hex())
    attrs = attributes(server)
    expected = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "fetch",
                "jsonrpc.request.id": "2", "network.transport": "pipe"}
    for key, value in expected.items():
        check(f"attribute {key} = {value}", attrs.get(key) == value, str(attrs))
    check("no argument (the URL's query) in any attribute",
          all("s3cr3t" not in str(attributes(s)) for s in spans))
    child = by_name.get("execute_tool fetch")
    check("execute_tool fetch is the server span's child",
          child is not None and child.parent_span_id == server.span_id
          and child.trace_id == server.trace_id)
    check("the span ended after it started", server.end_time_unix_nano >= server.start_time_unix_nano > 0)
    check("the plugin's request reached the web server", len(seen_traceparents) == 1,
          str(seen_traceparents))
    header = seen_traceparents[0]
    parts = header.split("-")
    ids = {s.span_id.hex() for s in spans}
    check("the plugin's request carried the client's trace",
          len(parts) == 4 and parts[1] == CLIENT_TRACE, header)
    check("with an exported span of the call as parent", parts[2] in ids, header)
    client = by_name.get("GET")
    check("that span is the request's own CLIENT span (W3C: the server's parent)",
          client is not None and parts[2] == client.span_id.hex()
          and client.kind == Span.SPAN_KIND_CLIENT, header)

    guest = by_name.get("plugin.call fetch")
    check("plugin.call fetch is execute_tool fetch's child",
          guest is not None and guest.parent_span_id == child.span_id
          and guest.kind == Span.SPAN_KIND_INTERNAL, str([s.name for s in spans]))
    instantiate = by_name.get("plugin.instantiate fetch")
    check("plugin.instantiate fetch is execute_tool fetch's child",
          instantiate is not None and instantiate.parent_span_id == child.span_id)
    get = by_name.get("GET")
    check("one CLIENT span GET under plugin.call fetch",
          get is not None and get.kind == Span.SPAN_KIND_CLIENT
          and get.parent_span_id == guest.span_id and get.trace_id == server.trace_id,
          str(get))
    port = int(origin_url.rsplit(":", 1)[1])
    http_attrs = attributes(get)
    expected = {"http.request.method": "GET", "server.address": "127.0.0.1",
                "server.port": port, "url.full": f"{origin_url}/page",
                "http.response.status_code": 200, "http.response.body.size": 5}
    for key, value in expected.items():
        check(f"GET attribute {key} = {value}", http_attrs.get(key) == value, str(http_attrs))
    check("the GET span lies within plugin.call fetch",
          guest.start_time_unix_nano <= get.start_time_unix_nano
          <= get.end_time_unix_nano <= guest.end_time_unix_nano)

    counted_server = next((s for s in spans if s.name == "tools/call wordcount"
                           and attributes(s).get("jsonrpc.request.id") == "3"), None)
    counted_handler = by_name.get("execute_tool wordcount")
    counted_guest = by_name.get("plugin.call wordcount")
    read = by_name.get("files.read")
    check("execute_tool wordcount and plugin.call wordcount nest under tools/call wordcount",
          counted_server is not None and counted_handler is not None and counted_guest is not None
          and counted_handler.parent_span_id == counted_server.span_id
          and counted_guest.parent_span_id == counted_handler.span_id)
    check("one files.read span under plugin.call wordcount",
          read is not None and read.parent_span_id == counted_guest.span_id
          and read.kind == Span.SPAN_KIND_INTERNAL, str(read))
    read_attrs = attributes(read)
    check("files.read names the path as the plugin did and the bytes read",
          read_attrs.get("file.path") == "notes/todo.md"
          and read_attrs.get("toolhost.file.bytes") == len("one two\nthree\n"), str(read_attrs))

    def checks_of(parent):
        return [c for c in checks if c.parent_span_id == parent.span_id]

    fetch_check = checks_of(server)
    check("one tool.arguments.check span under tools/call fetch, passed",
          len(fetch_check) == 1 and fetch_check[0].kind == Span.SPAN_KIND_INTERNAL
          and attributes(fetch_check[0]).get("toolhost.arguments.valid") is True
          and "error.type" not in attributes(fetch_check[0]),
          str(fetch_check))
    check("the check ended before execute_tool fetch started",
          server.start_time_unix_nano <= fetch_check[0].start_time_unix_nano
          <= fetch_check[0].end_time_unix_nano <= child.start_time_unix_nano)
    refused_servers = [s for s in spans if s.name == "tools/call wordcount"
                       and attributes(s).get("jsonrpc.request.id") == "4"]
    check("the refused call has its SERVER span with error.type refused",
          len(refused_servers) == 1
          and attributes(refused_servers[0]).get("error.type") == "refused",
          str(refused_servers))
    refused_check = checks_of(refused_servers[0])
    check("its tool.arguments.check span failed: error.type invalid_arguments, status ERROR",
          len(refused_check) == 1
          and attributes(refused_check[0]).get("toolhost.arguments.valid") is False
          and attributes(refused_check[0]).get("error.type") == "invalid_arguments"
          and refused_check[0].status.code == 2, str(refused_check))
    check("no handler span for the refused call",
          not any(s.parent_span_id == refused_servers[0].span_id
                  and s.name.startswith("execute_tool") for s in spans))
    check("every check span has an exported parent", all(c.parent_span_id in by_id for c in checks))
    print(f"otlp-check: all passed ({len(spans)} spans in {len(exports)} exports)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
