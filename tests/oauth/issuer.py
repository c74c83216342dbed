"""A small OAuth 2.1 authorization server on 127.0.0.1, built on Authlib, for
scripts/oauth-check: RFC 8414 metadata, a JWKS, and a client-credentials token endpoint
issuing RFC 9068 JWT access tokens (Authlib's JWTBearerTokenGenerator, RS256).

    python issuer.py AUDIENCE STATE_DIR

Prints `PORT n` once listening. Writes the current signing key (PEM) and its kid to
STATE_DIR/key.pem and STATE_DIR/kid, so the checker can mint hostile tokens with the
real key on its own (PyJWT). Control endpoints (loopback only, for the checker):
`POST /control/rotate` adds a second key to the JWKS and signs new tokens with it;
`GET /control/stats` gives how often the JWKS was fetched and when first.

Clients: `mcp-checker` (secret `checker-secret`, scopes `mcp:tools mcp:read`),
`narrow-client` (secret `narrow-secret`, scope `mcp:read` only), and for the policy
check `files-client` (`files-secret`, `mcp:tools tools:files`) and `greet-client`
(`greet-secret`, `mcp:tools tools:greet`). Serves until stdin
ends (or 10 minutes at most).
"""

import json
import os
import sys
import threading
import time
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

# Plain HTTP on loopback: Authlib refuses it unless told.
os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"

from authlib.oauth2 import AuthorizationServer  # noqa: E402
from authlib.oauth2.rfc6749 import ClientMixin, OAuth2Request  # noqa: E402
from authlib.oauth2.rfc6749.grants import ClientCredentialsGrant  # noqa: E402
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload  # noqa: E402
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from joserfc.jwk import RSAKey  # noqa: E402

# Authlib 1.9 asks for joserfc's KeySet.import_key_set where its RFC 9068 generator
# imports the key set itself; nothing for this server to change. (After the imports:
# Authlib sets its own filter for the warning.)
warnings.filterwarnings("ignore", message="Please `KeySet.import_key_set`")

AUDIENCE, STATE = sys.argv[1], sys.argv[2]


class Keys:
    """The signing keys: the JWKS publishes them all, tokens are signed with the last."""

    def __init__(self):
        self.lock = threading.Lock()
        self.keys = []
        self.jwks_fetches = 0
        self.first_fetch = None
        self.add()

    def add(self):
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        kid = f"key-{len(self.keys) + 1}"
        key = RSAKey.import_key(pem, {"kid": kid, "use": "sig", "alg": "RS256"})
        with self.lock:
            self.keys.append(key)
        with open(os.path.join(STATE, "key.pem.tmp"), "wb") as f:
            f.write(pem)
        os.replace(os.path.join(STATE, "key.pem.tmp"), os.path.join(STATE, "key.pem"))
        with open(os.path.join(STATE, "kid"), "w") as f:
            f.write(kid)

    def jwks(self):
        with self.lock:
            self.jwks_fetches += 1
            if self.first_fetch is None:
                self.first_fetch = time.time()
            return {"keys": [key.as_dict(private=False) for key in self.keys]}

    def signing(self):
        with self.lock:
            return self.keys[-1].as_dict(private=True)


KEYS = Keys()


class Client(ClientMixin):
    def __init__(self, client_id, secret, scope):
        self.client_id, self.secret, self.scope = client_id, secret, scope

    def get_client_id(self):
        return self.client_id

    def check_client_secret(self, client_secret):
        return client_secret == self.secret

    def check_endpoint_auth_method(self, method, endpoint):
        return method in ("client_secret_basic", "client_secret_post")

    def check_grant_type(self, grant_type):
        return grant_type == "client_credentials"

    def get_allowed_scope(self, scope):
        allowed = set(self.scope.split())
        return " ".join(s for s in (scope or self.scope).split() if s in allowed)


CLIENTS = {
    "mcp-checker": Client("mcp-checker", "checker-secret", "mcp:tools mcp:read"),
    "narrow-client": Client("narrow-client", "narrow-secret", "mcp:read"),
    "files-client": Client("files-client", "files-secret", "mcp:tools tools:files"),
    "greet-client": Client("greet-client", "greet-secret", "mcp:tools tools:greet"),
}
SCOPES = ["mcp:tools", "mcp:read", "tools:files", "tools:greet"]


class TokenGenerator(JWTBearerTokenGenerator):
    def get_jwks(self):
        # A key set (not a lone key): Authlib then names the key's kid in the header.
        return {"keys": [KEYS.signing()]}

    def get_audiences(self, client, user, scope):
        return AUDIENCE


class Server(AuthorizationServer):
    def query_client(self, client_id):
        return CLIENTS.get(client_id)

    def save_token(self, token, request):
        pass

    def send_signal(self, name, *args, **kwargs):
        pass

    def create_oauth2_request(self, request):
        method, url, headers, form = request
        oauth = OAuth2Request(method, url, headers=headers)
        oauth.payload = BasicOAuth2Payload(form)
        return oauth

    def handle_response(self, status, body, headers):
        return status, body, headers


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers:
            if name.lower() not in ("content-type", "content-length"):
                self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        base = ISSUER
        if self.path == "/.well-known/oauth-authorization-server":
            self.answer(200, {
                "issuer": base,
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token",
                "jwks_uri": f"{base}/jwks",
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                "scopes_supported": SCOPES,
                "response_types_supported": ["code"],
            })
        elif self.path == "/jwks":
            self.answer(200, KEYS.jwks())
        elif self.path == "/control/stats":
            self.answer(200, {"jwks_fetches": KEYS.jwks_fetches, "first_fetch": KEYS.first_fetch})
        else:
            self.answer(404, {"error": "not_found"})

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode()
        if self.path == "/token":
            form = dict(parse_qsl(body))
            status, payload, headers = SERVER.create_token_response(
                ("POST", f"{ISSUER}/token", self.headers, form)
            )
            self.answer(status, payload, headers)
        elif self.path == "/control/rotate":
            KEYS.add()
            self.answer(200, {"kid": open(os.path.join(STATE, "kid")).read()})
        else:
            self.answer(404, {"error": "not_found"})


httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
ISSUER = f"http://127.0.0.1:{httpd.server_address[1]}"
SERVER = Server(scopes_supported=SCOPES)
SERVER.register_grant(ClientCredentialsGrant)
SERVER.register_token_generator("default", TokenGenerator(issuer=ISSUER, alg="RS256"))
ClientCredentialsGrant.TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]
threading.Thread(target=httpd.serve_forever, daemon=True).start()
print(f"PORT {httpd.server_address[1]}", flush=True)


def stop_when_stdin_ends():
    sys.stdin.read()
    httpd.shutdown()


watcher = threading.Thread(target=stop_when_stdin_ends, daemon=True)
watcher.start()
watcher.join(timeout=600)
