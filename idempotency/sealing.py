"""Keys and stored answers kept out of the clear.

The table holds an HMAC of each key (SECRET_KEY) to find a retry's row, and each answer XORed
with a SHAKE-256 keystream seeded by SECRET_KEY, a per-row nonce and the key itself: reading the
table (a backup, a replica) gives neither the keys nor the answers, among them the one-time key
of an API token created with `POST /api/v1/tokens/`. Integrity is not the point: whoever can
write the table can write the tokens' table too.
"""
from __future__ import annotations

import hashlib
import hmac

from django.conf import settings


def key_digest(key: str) -> str:
    return hmac.new(settings.SECRET_KEY.encode(), b"idempotency-key\0" + key.encode(), hashlib.sha256).hexdigest()


def seal(data: bytes, *, key: str, nonce: bytes) -> bytes:
    """Encrypts and decrypts (XOR with the row's keystream)."""
    if not data:
        return b""
    seed = hmac.new(settings.SECRET_KEY.encode(), b"idempotency-body\0" + nonce + key.encode(), hashlib.sha256).digest()
    stream = hashlib.shake_256(seed).digest(len(data))
    return (int.from_bytes(data, "little") ^ int.from_bytes(stream, "little")).to_bytes(len(data), "little")
