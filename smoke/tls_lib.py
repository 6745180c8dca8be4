"""Certificates for the TLS smokes, made with the openssl CLI in a
temporary folder: a self-signed CA, and leaf certificates for localhost and
127.0.0.1 signed by it (each with its own serial); clients trust the CA
alone."""

import os
import shutil
import subprocess
import tempfile

from m0smoke import check, short

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"


def run(args, what, stdin=b"", timeout=20):
    p = subprocess.run(args, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


class Pki:
    """A CA and leaves signed by it, in a temporary folder removed at the end."""

    def __init__(self, ctx):
        self.dir = tempfile.mkdtemp(prefix="m0-tls-")
        ctx.finalizers.append(lambda: shutil.rmtree(self.dir, ignore_errors=True))
        self.ca_key, self.ca = self.path("ca.key"), self.path("ca.pem")
        rc, _, err = run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                          "ec_paramgen_curve:P-256", "-nodes", "-keyout", self.ca_key, "-out",
                          self.ca, "-days", "2", "-subj", "/CN=m0serve smoke CA"], "CA")
        check(rc == 0, "openssl req (CA): %s" % short(err))

    def path(self, name):
        return os.path.join(self.dir, name)

    def leaf(self, name, serial):
        """(cert, key) for localhost and 127.0.0.1, with `serial`."""
        key, csr, cert = self.path(name + ".key"), self.path(name + ".csr"), self.path(name + ".pem")
        ext = self.path(name + ".ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        rc, _, err = run([OPENSSL, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                          "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost"], "csr")
        check(rc == 0, "openssl req (leaf): %s" % short(err))
        rc, _, err = run([OPENSSL, "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey",
                          self.ca_key, "-set_serial", str(serial), "-days", "2", "-out", cert,
                          "-extfile", ext], "sign")
        check(rc == 0, "openssl x509 (sign): %s" % short(err))
        return cert, key
