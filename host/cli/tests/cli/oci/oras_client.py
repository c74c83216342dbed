"""The second client of the interoperability tests: oras-py (PyPI `oras`), driven
against a registry on loopback.

    python oras_client.py push REGISTRY/REPO:TAG DIR FILE[:MEDIA_TYPE] [--config FILE:MEDIA_TYPE]
    python oras_client.py pull REGISTRY/REPO:TAG OUTDIR

`push` pushes the files of DIR (paths relative to it, so their titles are the file
names). `pull` writes the layers into OUTDIR and prints the manifest as JSON on stdout.
Credentials, if any, come from ORAS_USER and ORAS_PASSWORD.
"""
import json
import os
import sys

import oras.client


def client(target):
    hostname = target.split("/", 1)[0]
    c = oras.client.OrasClient(hostname=hostname, insecure=True)
    user = os.environ.get("ORAS_USER")
    if user:
        c.login(username=user, password=os.environ["ORAS_PASSWORD"], hostname=hostname, insecure=True)
    return c


def main(argv):
    command, target = argv[1], argv[2]
    c = client(target)
    if command == "push":
        directory, files = argv[3], argv[4:]
        config = None
        if "--config" in files:
            at = files.index("--config")
            config = files[at + 1]
            files = files[:at] + files[at + 2 :]
        os.chdir(directory)
        response = c.push(target=target, files=files, manifest_config=config, quiet=True)
        response.raise_for_status()
        print(json.dumps({"status": response.status_code}))
    elif command == "pull":
        outdir = argv[3]
        paths = c.pull(target=target, outdir=outdir)
        manifest = c.get_manifest(target)
        print(json.dumps({"files": sorted(os.path.basename(p) for p in paths), "manifest": manifest}))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)
