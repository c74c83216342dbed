#!/usr/bin/env python3
# A hostile registry on 127.0.0.1:PORT for measuring `host pull`: every request gets a 401
# whose bearer challenge names a token service (here too) that streams a response forever
# (it stops by itself after 16 GiB or 120 s per connection, and says how much it sent).
#
#   python3 scripts/endless-token-registry.py 47311 &
#   (ulimit -v 4000000; /usr/bin/time -v host pull oci://127.0.0.1:47311/tools/greet:1 --plugins /tmp/p)
#
# The ulimit keeps a host without a cap on the token response from taking the machine's memory.
import http.server, socketserver, sys, time
PORT = int(sys.argv[1])
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path.startswith("/token"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            chunk = b" " * 65536
            sent, start = 0, time.time()
            try:
                while sent < (16 << 30) and time.time() - start < 120:
                    self.wfile.write(chunk); sent += len(chunk)
            except Exception:
                pass
            sys.stderr.write("token service sent %d bytes in %.1fs\n" % (sent, time.time() - start))
            return
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer realm="http://127.0.0.1:%d/token",service="fake"' % PORT)
        self.send_header("Content-Length", "0")
        self.end_headers()
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
S(("127.0.0.1", PORT), H).serve_forever()
