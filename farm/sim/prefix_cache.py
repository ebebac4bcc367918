"""The prefix cache: an LRU of chained hashes of full prompt blocks, as vLLM's automatic prefix caching keeps.

Block k's hash covers block k's tokens and the hash of block k-1, so a block hits only when the whole prefix
before it matches. Only full blocks are cached, and the prompt's last token is always computed (vLLM caps a
hit at n - 1 tokens), so a prompt of n tokens can have at most floor((n - 1) / block) blocks cached.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence


def block_hashes(tokens: Sequence[str], block_tokens: int) -> list[bytes]:
    """Chained hashes of the full blocks that may be cached (at most floor((n - 1) / block))."""
    usable = (len(tokens) - 1) // block_tokens if tokens else 0
    hashes = []
    previous = b""
    for k in range(usable):
        block = tokens[k * block_tokens : (k + 1) * block_tokens]
        digest = hashlib.blake2b(previous, digest_size=16)
        digest.update("\x1f".join(block).encode("utf-8"))
        previous = digest.digest()
        hashes.append(previous)
    return hashes


class PrefixCache:
    """LRU of block hashes with a capacity in blocks (0 disables caching)."""

    def __init__(self, capacity_blocks: int, block_tokens: int) -> None:
        self.capacity_blocks = capacity_blocks
        self.block_tokens = block_tokens
        self._blocks: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup(self, hashes: Sequence[bytes]) -> int:
        """Cached tokens for a prompt with these block hashes: leading blocks present × block size.

        A hit refreshes the block's place in the LRU.
        """
        hits = 0
        for digest in hashes:
            if digest not in self._blocks:
                break
            self._blocks.move_to_end(digest)
            hits += 1
        return hits * self.block_tokens

    def insert(self, hashes: Sequence[bytes]) -> None:
        """Remember a computed prompt's blocks, evicting the least recently used beyond capacity."""
        if self.capacity_blocks <= 0:
            return
        for digest in hashes:
            self._blocks[digest] = None
            self._blocks.move_to_end(digest)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)

    def clear(self) -> None:
        self._blocks.clear()
