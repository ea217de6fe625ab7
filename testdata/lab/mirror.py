#!/usr/bin/python3
"""A k0s release mirror for the lab: python's http.server on a loopback address, serving DIR with
GitHub-like release paths (`<version>/k0s-<version>-<arch>`, `<version>/sha256sums.txt`) and the
version index (`stable.txt`, `latest.txt`). Started and stopped by the tests (tests/support).

  mirror.py --bind 127.A.B.2 --dir DIR [--owner-pid PID]

Prints the port it listens on, then serves until killed (or until PID dies). Every GET is logged
to DIR/../mirror.log as `GET <path> <status>` (tests count downloads); a request in absolute form
(through it as an `http_proxy`) is served as its path and logged as received. A file `X.stall` beside
`X` makes a GET of X send its headers and first bytes, then stall (a server past the timeout).
"""

import argparse
import http.server
import os
import sys
import threading
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bind", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--owner-pid", type=int)
    a = p.parse_args()
    root = os.path.abspath(a.dir)
    log_path = os.path.join(os.path.dirname(root), "mirror.log")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kw):
            super().__init__(*args, directory=root, **kw)

        def translate_path(self, path):
            # A request in absolute form (`GET http://host:port/path`, what a client sends to
            # a proxy) is served as its path, as RFC 9112 section 3.2.2 asks of a server: the
            # mirror is then the proxy of a test's `http_proxy`. The log keeps the form received.
            if path.startswith("http://"):
                path = "/" + path[len("http://"):].partition("/")[2]
            return super().translate_path(path)

        def do_GET(self):
            path = self.translate_path(self.path)
            if os.path.isfile(path) and os.path.exists(path + ".stall"):
                self.send_response(200)
                self.send_header("Content-Length", str(os.path.getsize(path)))
                self.end_headers()
                self.wfile.write(b"\x7fELF")
                self.wfile.flush()
                time.sleep(3600)
                return
            super().do_GET()

        def log_request(self, code="-", size="-"):
            with open(log_path, "a") as f:
                f.write(f"GET {self.path} {code}\n")

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer((a.bind, 0), Handler)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    if a.owner_pid:
        def watch():
            while True:
                time.sleep(1)
                try:
                    os.kill(a.owner_pid, 0)
                except OSError:
                    os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
