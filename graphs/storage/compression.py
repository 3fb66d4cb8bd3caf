"""How reactgraph's SQLite files keep checkpoints: LangGraph's serializer, then zlib.

A checkpoint of a long run is mostly channel version strings (about 2.7 KB, written three times
a turn) and a write is mostly the model's text and its Observation; SQLite stores both as they
are. zlib makes a checkpoint about a fifth of that and text about a third. It goes through
LangGraph's own hook for transforming stored bytes (``EncryptedSerializer`` with a "cipher" that
compresses), so rows written before it (type ``msgpack``) read as they always did, and new ones
are typed ``msgpack+zlib``. To open a reactgraph SQLite file with a saver of your own, pass
``serde=reactgraph.storage.compression.serializer()``.

PostgreSQL compresses large values itself (TOAST); its savers are left as they are.
"""

from __future__ import annotations

import zlib

from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

ZLIB, PLAIN = "zlib", "plain"
MIN_BYTES = 128  # below this zlib's own header and checksum outweigh what it saves
LEVEL = 6


class Zlib(CipherProtocol):
    """The codec: zlib for values it makes smaller, the bytes as they are for the rest."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        if len(plaintext) >= MIN_BYTES:
            packed = zlib.compress(plaintext, LEVEL)
            if len(packed) < len(plaintext):
                return ZLIB, packed
        return PLAIN, plaintext

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        if ciphername == ZLIB:
            return zlib.decompress(ciphertext)
        if ciphername == PLAIN:
            return ciphertext
        raise ValueError(f"a checkpoint stored with an unknown codec: {ciphername!r}")


def serializer() -> SerializerProtocol:
    """LangGraph's default serializer with zlib over what it writes (reads both kinds)."""
    return EncryptedSerializer(Zlib(), JsonPlusSerializer())
