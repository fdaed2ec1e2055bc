"""Fixed-size KV blocks: per-sequence block tables over one pool, and the prefix cache over the pool.

Prefix cache (engine/prefix_key.py): a full block is found by a key chained from the key of the block before it and
its own token ids, the chain rooted in the identity of everything that changes the K/V values (weights, dtype,
quantization, KV layout). A sequence admitted with a cached prefix shares those blocks (reference counted) and
computes only the rest. A block no sequence holds sits on the free list, still findable, until it is handed out
again: the least recently freed first, blocks holding nothing cacheable before them.
"""

from __future__ import annotations

from collections import OrderedDict

from bringup.runner.engine.prefix_key import block_key, root_key
from bringup.runner.engine.sequence import Sequence

STALE = b"stale"  # the key of a block computed before the cache was dropped: never found, never a parent


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, caching: bool = False, identity: str = "") -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be >= 1")
        self.num_blocks, self.block_size, self.caching = num_blocks, block_size, caching
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))  # first out: evicted first
        self._refs = [0] * num_blocks
        self._key: list[bytes | None] = [None] * num_blocks  # a full block's key while it holds the keyed tokens
        self._cached: dict[bytes, int] = {}  # key -> block
        self.queries = self.hits = 0  # prompt tokens looked up in the cache, and found (vLLM's counters)
        self.identity, self._root = identity, root_key(identity)

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_cached_blocks(self) -> int:
        return len(self._cached)

    def use_identity(self, identity: str) -> None:
        """K/V from now on are computed under `identity`: what the cache holds is never found again."""
        if identity != self.identity:
            self.identity, self._root = identity, root_key(identity)
            self.drop_cache()

    def drop_cache(self) -> None:
        """Forget every cached block (their K/V may be overwritten or no longer match the plan); the blocks
        sequences hold now are never keyed, nor the blocks that follow them."""
        self._cached.clear()
        self._key = [STALE if refs else None for refs in self._refs]

    # ------------------------------------------------------------ tables
    def blocks_needed(self, seq: Sequence, num_tokens: int) -> int:
        """Extra blocks `seq` needs so that `num_tokens` tokens fit."""
        return max(0, -(-num_tokens // self.block_size) - len(seq.block_table))

    def can_grow(self, seq: Sequence, num_tokens: int) -> bool:
        return self.blocks_needed(seq, num_tokens) <= len(self._free)

    def grow(self, seq: Sequence, num_tokens: int) -> None:
        """Append free blocks to the table until `num_tokens` tokens fit (caller checked can_grow)."""
        for _ in range(self.blocks_needed(seq, num_tokens)):
            block, _ = self._free.popitem(last=False)
            self._forget(block)  # evicted: its K/V is about to be overwritten
            self._refs[block] = 1
            seq.block_table.append(block)

    def free(self, seq: Sequence) -> None:
        """Release the sequence's blocks (the last first, so a prefix outlives its tail); its K/V is forgotten by
        the sequence, and kept findable in the pool for a later one."""
        for block in reversed(seq.block_table):
            self._refs[block] -= 1
            if self._refs[block] == 0:
                self._free[block] = None
                if not self._findable(block):
                    self._free.move_to_end(block, last=False)  # nothing to find in it: handed out first
        seq.block_table = []
        seq.num_cached_tokens = 0

    # ------------------------------------------------------------ prefix cache
    def cached_prefix(self, seq: Sequence) -> list[int]:
        """The cached blocks holding `seq`'s leading full blocks (its last token always runs, for its logits)."""
        if not self.caching:
            return []
        found, key, size = [], self._root, self.block_size
        for start in range(0, len(seq.token_ids) - 1 - size + 1, size):
            key = block_key(key, seq.token_ids[start:start + size])
            block = self._cached.get(key)
            if block is None:
                break
            found.append(block)
        return found

    def computing(self, seq: Sequence, prefix: list[int], running: list[Sequence]) -> bool:
        """Whether a running sequence is still prefilling the block `seq` would compute next after its cached
        `prefix` (the same blocks before it, the same tokens in it): admitted now, `seq` would compute it again; a
        step later it finds it cached."""
        if not self.caching:
            return False
        size, index = self.block_size, len(prefix)
        tokens = seq.token_ids[index * size:(index + 1) * size]
        return len(tokens) == size and any(
            other.num_cached_tokens < (index + 1) * size <= len(other.token_ids) - 1
            and other.block_table[:index] == prefix and other.token_ids[index * size:(index + 1) * size] == tokens
            for other in running)

    def can_admit(self, seq: Sequence, prefix: list[int], num_tokens: int) -> bool:
        """Whether `seq` (holding no block) fits `num_tokens` tokens on top of the cached `prefix`."""
        fresh = max(0, -(-num_tokens // self.block_size) - len(prefix))
        return fresh + sum(1 for block in prefix if self._refs[block] == 0) <= len(self._free)

    def admit(self, seq: Sequence, prefix: list[int] | None, num_tokens: int) -> None:
        """Give `seq` the cached `prefix` (its K/V already computed; None: not looked up) and fresh blocks up to
        `num_tokens` tokens (caller checked can_admit); counts the lookup."""
        if self.caching and prefix is not None:
            self.queries += len(seq.token_ids)
            self.hits += len(prefix) * self.block_size
        prefix = prefix or []
        for block in prefix:
            if self._refs[block] == 0:
                del self._free[block]
            self._refs[block] += 1
        seq.block_table = list(prefix)
        seq.num_cached_tokens = len(prefix) * self.block_size
        self.grow(seq, num_tokens)

    def cache_full_blocks(self, seq: Sequence, computed_before: int) -> None:
        """Key the blocks that `seq`'s last step filled (its K/V computed past `computed_before` tokens)."""
        if not self.caching:
            return
        size, table = self.block_size, seq.block_table
        for index in range(computed_before // size, seq.num_cached_tokens // size):
            block = table[index]
            parent = self._root if index == 0 else self._key[table[index - 1]]
            if self._key[block] is not None:  # found in the cache
                continue
            if parent is STALE or parent is None:  # computed (in part) before the cache was dropped
                self._key[block] = STALE
                continue
            key = block_key(parent, seq.token_ids[index * size:(index + 1) * size])
            self._key[block] = key
            self._cached.setdefault(key, block)

    def _findable(self, block: int) -> bool:
        key = self._key[block]
        return key is not None and self._cached.get(key) == block

    def _forget(self, block: int) -> None:
        key = self._key[block]
        if key is not None and self._cached.get(key) == block:
            del self._cached[key]
        self._key[block] = None
