"""Test certificates for rediss:// (TLS to Redis): a private CA, a server certificate it
signs for 127.0.0.1 and localhost, one it signs for another name only (redis.invalid),
and another CA with a server certificate for 127.0.0.1 it signs (a server a host given
the first CA must refuse). Written as PEM into the directory given: ca.pem, server.pem,
server.key, wrong-name.pem, wrong-name.key, other-ca.pem, other-server.pem,
other-server.key. Used by scripts/state-check (fresh ones each run) and, run once, for
the fixtures of host/toolhost-mcp/src/state/testdata (valid for 100 years).

Usage: python3 make_certs.py DIR
"""

import datetime
import ipaddress
import pathlib
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
UNTIL = NOW + datetime.timedelta(days=36500)


def key():
    return ec.generate_private_key(ec.SECP256R1())


def name(common):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def ca(common):
    private = key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(common))
        .issuer_name(name(common))
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW)
        .not_valid_after(UNTIL)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(private.public_key()), critical=False)
        .sign(private, hashes.SHA256())
    )
    return cert, private


def server(issuer, issuer_key, names):
    private = key()
    alt = []
    for entry in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(entry)))
        except ValueError:
            alt.append(x509.DNSName(entry))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(names[0]))
        .issuer_name(issuer.subject)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW)
        .not_valid_after(UNTIL)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
        .sign(issuer_key, hashes.SHA256())
    )
    return cert, private


def write(directory, stem, cert, private=None):
    (directory / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if private is not None:
        (directory / f"{stem}.key").write_bytes(
            private.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )


def main():
    directory = pathlib.Path(sys.argv[1])
    directory.mkdir(parents=True, exist_ok=True)
    root, root_key = ca("toolhost test CA")
    write(directory, "ca", root)
    write(directory, "server", *server(root, root_key, ["localhost", "127.0.0.1"]))
    write(directory, "wrong-name", *server(root, root_key, ["redis.invalid"]))
    other, other_key = ca("another CA")
    write(directory, "other-ca", other)
    write(directory, "other-server", *server(other, other_key, ["localhost", "127.0.0.1"]))


if __name__ == "__main__":
    main()
