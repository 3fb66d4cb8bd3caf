"""tiktoken's cl100k_base encoding from the copy shipped in this package, so that token counts
are exact for cl100k_base models and close for the others on a machine that cannot download.

``cl100k_base.tiktoken.gz`` is OpenAI's published BPE file (the one tiktoken downloads from
openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken), gzipped: 0.8 MB instead of
1.7 MB, its SHA-256 checked after reading, as tiktoken checks a download. The ranks are read in
tiktoken's own format (``load_tiktoken_bpe``'s: a base64 token and its rank a line) and made
into a ``tiktoken.Encoding`` with cl100k_base's split pattern and special tokens.
``load_tiktoken_bpe`` itself is not called on the file: it copies whatever it reads into
tiktoken's cache folder and fails when that folder (``TIKTOKEN_CACHE_DIR``) is read-only.

Loaded only when a count is first needed (never at import), once per process.
"""

from __future__ import annotations

import binascii
import functools
import gzip
import hashlib
from importlib import resources
from typing import Any

NAME = "cl100k_base"
FILE = "cl100k_base.tiktoken.gz"
SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
"""The hash tiktoken expects of cl100k_base's file (``tiktoken_ext.openai_public``)."""
PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
"""cl100k_base's split pattern, as in ``tiktoken_ext.openai_public.cl100k_base``."""
SPECIAL_TOKENS = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


def read_ranks(data: bytes) -> dict[bytes, int]:
    """The mergeable ranks of a ``.tiktoken`` file's contents; ValueError when it is not one."""
    if hashlib.sha256(data).hexdigest() != SHA256:
        raise ValueError(f"{FILE} is not cl100k_base's file (its SHA-256 differs)")
    fields = data.split()  # a token, its rank, a token, ...: read in C, not line by line
    if len(fields) % 2:
        raise ValueError(f"{FILE} has a token without its rank")
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))


@functools.cache
def cl100k_base() -> Any:
    """The cl100k_base ``tiktoken.Encoding`` from this package's copy (OSError or ValueError when
    the copy is missing or damaged)."""
    import tiktoken

    with resources.files(__package__).joinpath(FILE).open("rb") as packed:
        data = gzip.decompress(packed.read())
    return tiktoken.Encoding(
        name=NAME,
        pat_str=PATTERN,
        mergeable_ranks=read_ranks(data),
        special_tokens=SPECIAL_TOKENS,
    )
