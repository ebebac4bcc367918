"""Host keys: an Ed25519 key pair per host, made at the worker's first start and kept in its data directory.

The private key lives in `<data dir>/keys/host_ed25519` (PKCS#8 PEM, mode 0600, written once and never
rewritten) and nowhere else: it is never logged, stored in the database, exported or served. Its public half
goes with the worker's row and with every bundle. A key is named by its fingerprint, `ed25519:` and the first
32 hex digits of the sha256 of the 32 raw public key bytes; that fingerprint is the key id a signature names.

A public key is written, for `farm keys show --public` and files given to `farm keys trust`, as one line:
`ed25519 <base64 of the 32 raw bytes> [comment]`; a PEM SubjectPublicKeyInfo block is read too.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from farm.errors import SigningError

KEY_DIR = "keys"
PRIVATE_KEY_FILE = "host_ed25519"
PUBLIC_KEY_FILE = "host_ed25519.pub"
FINGERPRINT_PREFIX = "ed25519:"
FINGERPRINT_HEX = 32
"""128 bits of the key's sha256: a name, not the check (a signature is checked against the whole key)."""
_FINGERPRINT = re.compile(r"^ed25519:[0-9a-f]{32}$")


def fingerprint(public_raw: bytes) -> str:
    """The key id of a raw 32-byte Ed25519 public key."""
    return FINGERPRINT_PREFIX + hashlib.sha256(public_raw).hexdigest()[:FINGERPRINT_HEX]


def is_fingerprint(text: str) -> bool:
    return _FINGERPRINT.match(text.strip()) is not None


@dataclass(frozen=True)
class PublicKey:
    """A public key: its raw bytes and its key id."""

    raw: bytes

    @property
    def key_id(self) -> str:
        return fingerprint(self.raw)

    @property
    def text(self) -> str:
        """The base64 of the raw bytes (what the store and bundles keep)."""
        return base64.b64encode(self.raw).decode("ascii")

    def line(self, comment: str = "") -> str:
        """The one-line form: `ed25519 <base64> [comment]`."""
        return f"ed25519 {self.text}" + (f" {comment}" if comment else "")

    @classmethod
    def from_text(cls, text: str) -> PublicKey:
        """A key from its base64 (the store's and bundles' form), its one-line form or a PEM block."""
        stripped = text.strip()
        if stripped.startswith("-----BEGIN"):
            try:
                loaded = serialization.load_pem_public_key(stripped.encode("ascii"))
            except (ValueError, UnicodeEncodeError) as exc:
                raise SigningError(f"not a PEM public key: {exc}") from exc
            if not isinstance(loaded, Ed25519PublicKey):
                raise SigningError(f"a {type(loaded).__name__}, not an Ed25519 public key")
            return cls(loaded.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))
        parts = stripped.split()
        if len(parts) >= 2 and parts[0] == "ed25519":
            stripped = parts[1]
        elif len(parts) != 1:
            raise SigningError("a public key is `ed25519 <base64>`, its base64 alone, or a PEM block")
        try:
            raw = base64.b64decode(stripped, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise SigningError(f"a public key's base64 does not decode: {exc}") from exc
        if len(raw) != 32:
            raise SigningError(f"an Ed25519 public key is 32 bytes, this one {len(raw)}")
        return cls(raw)

    def verifies(self, signature: bytes, message: bytes) -> bool:
        """Whether `signature` is this key's signature of `message`."""
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, message)
        except InvalidSignature:
            return False
        return True


class HostKey:
    """This host's key pair. The private half stays inside this object and its file; `repr` never shows it."""

    def __init__(self, private: Ed25519PrivateKey, path: Path | None = None) -> None:
        self._private = private
        self.path = path
        self.public = PublicKey(
            private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        )

    @property
    def key_id(self) -> str:
        return self.public.key_id

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)

    def __repr__(self) -> str:
        return f"HostKey({self.key_id})"

    @classmethod
    def generate(cls) -> HostKey:
        """A fresh key pair held in memory only (tests, benchmarks)."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load_or_create(cls, data_dir: Path) -> HostKey:
        """The host key of this data directory, made (0600, atomically, once) when there is none.

        Two workers starting at once on one data directory make one key: the file is linked into place only if
        none is there yet, and the loser reads the winner's."""
        directory = data_dir / KEY_DIR
        path = directory / PRIVATE_KEY_FILE
        if not path.exists():
            try:
                directory.mkdir(parents=True, exist_ok=True, mode=0o700)
                cls._create(path)
            except OSError as exc:
                raise SigningError(f"cannot make the host key {path}: {exc.strerror or exc}") from exc
        return cls.load(path)

    @staticmethod
    def _create(path: Path) -> None:
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(pem)
                handle.flush()
                os.fsync(handle.fileno())
            with contextlib.suppress(FileExistsError):  # another worker made it first: its key is the host's
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        public = PublicKey(key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))
        if path.read_bytes() == pem:
            path.with_name(PUBLIC_KEY_FILE).write_text(public.line() + "\n", encoding="ascii")

    @classmethod
    def load(cls, path: Path) -> HostKey:
        """The key in `path`; SigningError when it cannot be read, is not Ed25519, or others can read it."""
        try:
            mode = path.stat().st_mode & 0o777
            data = path.read_bytes()
        except OSError as exc:
            raise SigningError(f"cannot read the host key {path}: {exc.strerror or exc}") from exc
        if mode & 0o077:
            raise SigningError(f"the host key {path} is readable by others (mode {mode:o}); chmod 600 it")
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise SigningError(f"the host key {path} is not a PEM private key") from exc
        if not isinstance(key, Ed25519PrivateKey):
            raise SigningError(f"the host key {path} is not an Ed25519 key")
        return cls(key, path)
