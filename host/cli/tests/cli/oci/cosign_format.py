"""An independent implementation of cosign's key-based signature format, for the
interoperability tests of signed plugins: it shares no code with the host (Python's
`cryptography` for the keys and signatures, plain HTTP to a registry on loopback).

    python cosign_format.py keygen OUT [ed25519]
        OUT.key (PKCS#8 PEM) and OUT.pub (SubjectPublicKeyInfo PEM).
    python cosign_format.py sign REGISTRY/REPO DIGEST KEY [MODE]
        Builds the simple-signing payload of DIGEST, signs it (ECDSA P-256 with SHA-256,
        DER; or Ed25519) and pushes the signature manifest under sha256-HEX.sig.
        MODE spoils it on purpose: flip (a bit of the signature), payload (the payload
        names another digest after signing), annotation-elsewhere (the signature on a
        second, non-signature layer only), base64 (not base64), huge (the layer declares
        1 GiB), layers:N (N copies of the layer), other-digest:D (a valid signature of
        D), self (the .sig tag is the signed manifest itself); oras pushes the good
        signature with oras-py (PyPI `oras`) instead of plain HTTP.
    python cosign_format.py verify REGISTRY/REPO DIGEST KEY.pub
        Fetches sha256-HEX.sig and prints {"verified": N} (signatures by KEY.pub over
        DIGEST); exits 1 when none verifies.

Prints JSON on stdout. Loopback registries only (plain HTTP).
"""
import base64
import hashlib
import json
import sys
import urllib.request

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
ANNOTATION = "dev.cosignproject.cosign/signature"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def check_loopback(registry):
    host = registry.rsplit(":", 1)[0]
    if not (host.startswith("127.") or host in ("localhost", "[::1]")):
        sys.exit(f"{registry} is not a loopback registry")


def request(method, url, body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    with urllib.request.urlopen(req, timeout=30) as response:
        return response.status, dict(response.headers), response.read(4 * 1024 * 1024)


def digest_of(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def push_blob(registry, repo, data):
    digest = digest_of(data)
    _, headers, _ = request("POST", f"http://{registry}/v2/{repo}/blobs/uploads/")
    location = headers["Location"]
    if location.startswith("/"):
        location = f"http://{registry}{location}"
    sep = "&" if "?" in location else "?"
    request("PUT", f"{location}{sep}digest={digest}", data, {"Content-Type": "application/octet-stream"})
    return digest


def put_manifest(registry, repo, tag, body):
    request("PUT", f"http://{registry}/v2/{repo}/manifests/{tag}", body, {"Content-Type": OCI_MANIFEST})


def get_manifest(registry, repo, ref):
    _, _, body = request(
        "GET", f"http://{registry}/v2/{repo}/manifests/{ref}", headers={"Accept": OCI_MANIFEST}
    )
    return body


def sig_tag(digest):
    return digest.replace(":", "-", 1) + ".sig"


def payload_for(registry, repo, digest):
    return json.dumps(
        {
            "critical": {
                "identity": {"docker-reference": f"{registry}/{repo}"},
                "image": {"docker-manifest-digest": digest},
                "type": "cosign container image signature",
            },
            "optional": None,
        },
        separators=(",", ":"),
    ).encode()


def load_private(path):
    with open(path, "rb") as f:
        return serialization.load_pem_private_key(f.read(), password=None)


def sign_bytes(key, data):
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.sign(data, ec.ECDSA(hashes.SHA256()))
    return key.sign(data)


def keygen(out, kind):
    key = ed25519.Ed25519PrivateKey.generate() if kind == "ed25519" else ec.generate_private_key(ec.SECP256R1())
    with open(out + ".key", "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    with open(out + ".pub", "wb") as f:
        f.write(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    return {"written": [out + ".key", out + ".pub"]}


def sign(target, digest, key_path, mode):
    registry, repo = target.split("/", 1)
    check_loopback(registry)
    key = load_private(key_path)
    payload = payload_for(registry, repo, digest)
    signature = sign_bytes(key, payload)
    if mode == "flip":
        signature = signature[:-1] + bytes([signature[-1] ^ 1])
    if mode == "payload":
        payload = payload.replace(digest.encode(), b"sha256:" + b"0" * 64)
    annotation = base64.b64encode(signature).decode()
    if mode == "base64":
        annotation = "not*base64!"
    if mode == "oras":
        return push_with_oras(registry, repo, digest, payload, annotation)
    payload_digest = push_blob(registry, repo, payload)
    layer = {"mediaType": SIMPLE_SIGNING, "size": len(payload), "digest": payload_digest,
             "annotations": {ANNOTATION: annotation}}
    if mode == "huge":
        layer["size"] = 1 << 30
    layers = [layer]
    if mode == "annotation-elsewhere":
        other = push_blob(registry, repo, b"{}")
        layers = [
            {"mediaType": SIMPLE_SIGNING, "size": len(payload), "digest": payload_digest},
            {"mediaType": "application/octet-stream", "size": 2, "digest": other,
             "annotations": {ANNOTATION: annotation}},
        ]
    if mode.startswith("layers:"):
        layers = [layer] * int(mode.split(":", 1)[1])
    if mode.startswith("other-digest:"):
        # A valid signature of another manifest, stored under this one's tag.
        payload = payload_for(registry, repo, mode.split(":", 1)[1])
        layer["size"] = len(payload)
        layer["digest"] = push_blob(registry, repo, payload)
        layer["annotations"][ANNOTATION] = base64.b64encode(sign_bytes(key, payload)).decode()
    config = json.dumps({"architecture": "", "os": "", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [payload_digest]}}).encode()
    config_digest = push_blob(registry, repo, config)
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": len(config),
                   "digest": config_digest},
        "layers": layers,
    }).encode()
    if mode == "self":
        manifest = get_manifest(registry, repo, digest)
    put_manifest(registry, repo, sig_tag(digest), manifest)
    return {"tag": sig_tag(digest), "manifest_bytes": len(manifest)}


def push_with_oras(registry, repo, digest, payload, annotation):
    """Pushes the signature manifest with a second, independent OCI client (oras-py):
    the payload as the one simple-signing layer, the signature as its annotation."""
    import os
    import tempfile

    import oras.client

    with tempfile.TemporaryDirectory() as directory:
        with open(os.path.join(directory, "payload.json"), "wb") as f:
            f.write(payload)
        annotations = os.path.join(directory, "annotations.json")
        with open(annotations, "w") as f:
            json.dump({"payload.json": {ANNOTATION: annotation}}, f)
        cwd = os.getcwd()
        os.chdir(directory)
        try:
            client = oras.client.OrasClient(hostname=registry, insecure=True)
            response = client.push(
                target=f"{registry}/{repo}:{sig_tag(digest)}",
                files=[f"payload.json:{SIMPLE_SIGNING}"],
                annotation_file=annotations,
                quiet=True,
            )
            response.raise_for_status()
        finally:
            os.chdir(cwd)
    return {"tag": sig_tag(digest), "pushed_with": "oras"}


def verify(target, digest, pub_path):
    registry, repo = target.split("/", 1)
    check_loopback(registry)
    with open(pub_path, "rb") as f:
        public = serialization.load_pem_public_key(f.read())
    manifest = json.loads(get_manifest(registry, repo, sig_tag(digest)))
    verified = 0
    for layer in manifest["layers"][:64]:
        if layer.get("mediaType") != SIMPLE_SIGNING or layer.get("size", 0) > 65536:
            continue
        _, _, payload = request("GET", f"http://{registry}/v2/{repo}/blobs/{layer['digest']}")
        if digest_of(payload) != layer["digest"]:
            continue
        signature = base64.b64decode(layer.get("annotations", {}).get(ANNOTATION, ""))
        try:
            if isinstance(public, ec.EllipticCurvePublicKey):
                public.verify(signature, payload, ec.ECDSA(hashes.SHA256()))
            else:
                public.verify(signature, payload)
        except InvalidSignature:
            continue
        critical = json.loads(payload)["critical"]
        if critical["image"]["docker-manifest-digest"] == digest and critical["type"] == "cosign container image signature":
            verified += 1
    return {"verified": verified}


def main(argv):
    command = argv[1]
    if command == "keygen":
        result = keygen(argv[2], argv[3] if len(argv) > 3 else "ecdsa")
    elif command == "sign":
        result = sign(argv[2], argv[3], argv[4], argv[5] if len(argv) > 5 else "")
    elif command == "verify":
        result = verify(argv[2], argv[3], argv[4])
    else:
        sys.exit(f"unknown command {command}")
    print(json.dumps(result))
    if command == "verify" and result["verified"] == 0:
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv)
