"""Immutable sequences and sets that change one element without copying the rest.

Why: a `RunState` holds one status, activation and counter per node and the set of passes; each
event changes one or two of them. Copying a 10,000-element tuple per event made replaying an
n-node ledger cost O(n^2). `Row` (a tuple) and `Bag` (a frozenset) share all but the changed
path of a 32-way trie with the value they came from, so an update costs O(log_32 n) -- at most
four 32-element copies up to a million nodes. They are values as their plain counterparts are:
a `Row` equals the tuple of its items and hashes like it, a `Bag` equals the frozenset of its
items and hashes like it, so a state holding one equals and hashes as a state holding the
other. `model.state` uses them only past `SMALL` elements; small graphs keep plain tuples.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Set
from itertools import chain
from typing import Any

BITS, FAN = 5, 32
MASK = FAN - 1
SMALL = 64  # up to this many elements a plain copy is cheaper than a trie


class Row(Sequence[Any]):
    """An immutable sequence (a trie of 32-element tuples); `set` returns a changed copy."""

    __slots__ = ("_depth", "_hash", "_n", "_root")
    _depth: int
    _hash: int | None
    _n: int
    _root: tuple[Any, ...]

    def __init__(self, items: Iterable[Any] = ()) -> None:
        level: list[Any] = list(items)
        n, depth = len(level), 0
        level = [tuple(level[i:i + FAN]) for i in range(0, n, FAN)] or [()]
        while len(level) > 1:
            level = [tuple(level[i:i + FAN]) for i in range(0, len(level), FAN)]
            depth += 1
        self._n, self._depth, self._root, self._hash = n, depth, level[0], None

    def set(self, i: int, value: Any) -> Row:
        """A copy with item `i` replaced by `value`."""
        if not 0 <= i < self._n:
            raise IndexError("Row index out of range")
        path, node = [], self._root
        for level in range(self._depth, 0, -1):
            j = (i >> (BITS * level)) & MASK
            path.append((node, j))
            node = node[j]
        items = list(node)
        items[i & MASK] = value
        new: tuple[Any, ...] = tuple(items)
        for parent, j in reversed(path):
            items = list(parent)
            items[j] = new
            new = tuple(items)
        out = object.__new__(Row)
        out._n, out._depth, out._root, out._hash = self._n, self._depth, new, None
        return out

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if not isinstance(i, int):
            return self.items()[i]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("Row index out of range")
        node = self._root
        for level in range(self._depth, 0, -1):
            node = node[(i >> (BITS * level)) & MASK]
        return node[i & MASK]

    def __iter__(self) -> Iterator[Any]:
        it: Iterator[Any] = iter(self._root)
        for _ in range(self._depth):
            it = chain.from_iterable(it)
        return it

    def items(self) -> tuple[Any, ...]:
        """The items as a plain tuple (O(n))."""
        return tuple(iter(self))

    def __contains__(self, value: object) -> bool:
        return any(x is value or x == value for x in self)

    def count(self, value: Any) -> int:
        return self.items().count(value)

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        return self.items().index(value, start, self._n if stop is None else stop)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Row):
            return other._root is self._root or (other._n == self._n
                                                 and other.items() == self.items())
        if isinstance(other, tuple):
            return len(other) == self._n and other == self.items()
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self.items())
        return self._hash

    def __repr__(self) -> str:
        return repr(self.items())

    def __reduce__(self) -> tuple[Any, ...]:
        return (Row, (self.items(),))


class Bag(Set[Any]):
    """An immutable set (a hash trie of 32-way tuples, frozensets at the leaves); `add` returns
    a copy with one more item."""

    __slots__ = ("_hash", "_n", "_root")
    _hash: int | None  # type: ignore[assignment]  # shadows Set._hash, the method __hash__ no longer calls
    _n: int
    _root: tuple[tuple[frozenset[Any], ...], ...]
    LEVELS = 2  # 1,024 leaves: a leaf of a 100,000-item bag holds ~100 items

    def __init__(self, items: Iterable[Any] = ()) -> None:
        leaves: list[set[Any]] = [set() for _ in range(FAN ** self.LEVELS)]
        for x in items:
            h = hash(x)
            leaves[(h & MASK) << BITS | (h >> BITS) & MASK].add(x)
        self._root = tuple(tuple(frozenset(leaves[a << BITS | b]) for b in range(FAN))
                           for a in range(FAN))
        self._n, self._hash = sum(len(s) for s in leaves), None

    def add(self, item: Any) -> Bag:
        """A copy holding `item` too (this one if it already does)."""
        h = hash(item)
        a, b = h & MASK, (h >> BITS) & MASK
        leaf = self._root[a][b]
        if item in leaf:
            return self
        mid = list(self._root[a])
        mid[b] = leaf | {item}
        root = list(self._root)
        root[a] = tuple(mid)
        out = object.__new__(Bag)
        out._root, out._n, out._hash = tuple(root), self._n + 1, None
        return out

    def __or__(self, other: Any) -> Bag:
        out = self
        for x in other:
            out = out.add(x)
        return out

    def __contains__(self, item: object) -> bool:
        h = hash(item)
        return item in self._root[h & MASK][(h >> BITS) & MASK]

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[Any]:
        return chain.from_iterable(chain.from_iterable(self._root))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Bag):
            return other._root is self._root or (other._n == self._n
                                                 and all(x in other for x in self))
        if isinstance(other, Set):
            return len(other) == self._n and all(x in other for x in self)
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self))
        return self._hash

    def __repr__(self) -> str:
        return f"Bag({set(self)!r})" if self._n else "Bag()"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Bag, (tuple(self),))

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> frozenset[Any]:
        return frozenset(it)


def replaced(t: Sequence[Any], i: int, value: Any) -> Sequence[Any]:
    """`t` with item `i` replaced: a tuple copy while small, else a `Row` sharing the rest."""
    if type(t) is Row:
        return t.set(i, value)
    if len(t) > SMALL:
        return Row(t).set(i, value)
    items = list(t)
    items[i] = value
    return tuple(items)


def replaced_many(t: Sequence[Any], changes: dict[int, Any]) -> Sequence[Any]:
    """`t` with every item `i` of `changes` replaced by `changes[i]`."""
    if len(t) <= SMALL or len(changes) * 8 > len(t):
        items = list(t)
        for i, v in changes.items():
            items[i] = v
        return tuple(items) if len(items) <= SMALL else Row(items)
    out = t if type(t) is Row else Row(t)
    for i, v in changes.items():
        out = out.set(i, v)
    return out


def added(s: frozenset[Any] | Bag, item: Any) -> frozenset[Any] | Bag:
    """`s` with `item` too: a frozenset copy while small, else a `Bag` sharing the rest."""
    if type(s) is Bag:
        return s.add(item)
    if len(s) >= SMALL:
        return Bag(s).add(item)
    return s | {item}
