"""Trees and files that travel between the engine and a Dask worker, content-addressed.

Why content-addressed: there is no shared file system. A tree (a workspace, a judged snapshot,
the files a worker's or a gate's command names) travels as a `Tree`: every entry's relative path,
kind, permission bits and, for a file, the SHA-256 of its bytes; the bytes themselves travel
once per host as blobs named by that digest, and every blob is checked against its name where it
arrives (`BlobStore.put`) and again as it is copied into place (`materialize`). What the engine
already sent a host, or the host sent back, is not sent again.

The entries follow the judged-tree rules of engine/system/judged.py (`_walk`: bytes names, an
iterative walk, the node's limits checked as it goes, special files left out), except that a
symlink is carried as a link (kind "l", its target), so that the engine, staging the tree that
came back, refuses it with the words it uses for a local workspace.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.system.judged import Limits, TreeRefused, _unreadable, _walk
from loopproof.engine.system.trees import _b, remove_tree, shown

DIR, FILE, LINK = "d", "f", "l"
_CHUNK = 1 << 20

# (path relative to the tree's root as bytes, kind, permission bits, sha256 of a file's bytes /
# a link's target as text / "" for a folder)
Entry = tuple[bytes, str, int, str]


class Corrupt(Exception):
    """Bytes that do not hash to the digest they travel under: never used."""


@dataclass(frozen=True)
class Tree:
    """A folder as it travels: its root's permission bits and its entries, folders before
    their contents."""

    mode: int
    entries: tuple[Entry, ...]

    def digests(self) -> set[str]:
        """The blobs its files need."""
        return {data for _p, kind, _m, data in self.entries if kind == FILE}

    def paths(self) -> set[bytes]:
        return {p for p, _k, _m, _d in self.entries}


def sha256_of(path: bytes | str | Path) -> str:
    """SHA-256 of a regular file's bytes, opened without following a link swapped in."""
    fd = os.open(_b(path), os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def pack(root: Path | str, limits: Limits | None = None) -> tuple[Tree, dict[str, bytes]]:
    """The `Tree` of `root` and where each of its blobs can be read here (digest -> absolute
    path). Raises `TreeRefused` when it exceeds `limits` or an entry cannot be read."""
    r = _b(root)
    entries: list[Entry] = []
    where: dict[str, bytes] = {}
    try:
        top = os.lstat(r)
        for path, st, _depth in _walk(r, limits, refuse_links=False):
            rel = os.path.relpath(path, r)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                entries.append((rel, DIR, mode, ""))
            elif stat.S_ISREG(st.st_mode):
                digest = sha256_of(path)
                where.setdefault(digest, path)
                entries.append((rel, FILE, mode, digest))
            elif stat.S_ISLNK(st.st_mode):
                entries.append((rel, LINK, 0, os.fsdecode(os.readlink(path))))
    except OSError as exc:
        raise TreeRefused(_unreadable(r, exc)) from None
    return Tree(stat.S_IMODE(top.st_mode), tuple(entries)), where


def mirror(paths: Iterable[Path | str], limits: Limits | None = None,
           exclude: Iterable[Path | str] = ()) -> tuple[Tree, dict[str, bytes]]:
    """Files and folders named by absolute path, as one tree rooted at "/": each keeps its path
    below whatever folder it is materialized in (a gate file beside the file it reads stays
    beside it). Folders on the way are 0o755. Anything at or below an `exclude` path (what the
    command must not see: the gate's files, the run's own) is left out."""
    entries: dict[bytes, Entry] = {}
    where: dict[str, bytes] = {}
    out = {_b(os.path.abspath(x)).lstrip(b"/") for x in exclude}

    def kept(rel: bytes) -> bool:
        return not any(rel == o or rel.startswith(o + b"/") for o in out)

    for p in sorted({os.path.abspath(p) for p in paths}):
        if not kept(_b(p).lstrip(b"/")):
            continue
        rel = _b(p).lstrip(b"/")
        parts = rel.split(b"/")
        for i in range(1, len(parts)):
            entries.setdefault(b"/".join(parts[:i]), (b"/".join(parts[:i]), DIR, 0o755, ""))
        st = os.stat(p)
        if stat.S_ISDIR(st.st_mode):
            tree, found = pack(p, limits)
            entries.setdefault(rel, (rel, DIR, stat.S_IMODE(st.st_mode), ""))
            for sub, kind, mode, data in tree.entries:
                if kept(rel + b"/" + sub):
                    entries.setdefault(rel + b"/" + sub, (rel + b"/" + sub, kind, mode, data))
            where.update(found)
        else:
            digest = sha256_of(os.path.realpath(p))
            where.setdefault(digest, _b(os.path.realpath(p)))
            entries[rel] = (rel, FILE, stat.S_IMODE(st.st_mode), digest)
    ordered = sorted(entries.values(), key=lambda e: e[0].split(b"/"))
    return Tree(0o755, tuple(ordered)), where


def read_blobs(digests: Iterable[str], where: Mapping[str, bytes]) -> dict[str, bytes]:
    """The bytes of `digests`, each read from where `pack` or `mirror` found it and checked."""
    out: dict[str, bytes] = {}
    for d in digests:
        with open(where[d], "rb") as fh:
            data = fh.read()
        if hashlib.sha256(data).hexdigest() != d:
            raise Corrupt(f"{shown(where[d])} changed while it was being sent")
        out[d] = data
    return out


class BlobStore:
    """A host's blobs: one file per digest, written only after its bytes were checked."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, digest: str) -> Path:
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise Corrupt(f"{digest[:80]!r} is not a SHA-256 digest")
        return self.root / digest

    def has(self, digest: str) -> bool:
        return self.path(digest).is_file()

    def missing(self, digests: Iterable[str]) -> list[str]:
        return sorted(d for d in set(digests) if not self.has(d))

    def put(self, digest: str, data: bytes) -> None:
        if hashlib.sha256(data).hexdigest() != digest:
            raise Corrupt(f"a blob sent as {digest[:12]}... hashes otherwise")
        target = self.path(digest)
        if target.is_file():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{digest}.{os.getpid()}.{id(data)}")
        tmp.write_bytes(data)
        os.replace(tmp, target)

    def put_all(self, blobs: Mapping[str, bytes]) -> None:
        for d, data in blobs.items():
            self.put(d, data)

    def adopt(self, tree: Tree, root: Path | str) -> dict[str, bytes]:
        """Keep every file of `tree` (materialized or packed at `root`) that is not here yet;
        returns those blobs' bytes (what the other side may lack)."""
        out: dict[str, bytes] = {}
        r = _b(root)
        for rel, kind, _mode, digest in tree.entries:
            if kind != FILE or self.has(digest) or digest in out:
                continue
            with open(os.path.join(r, rel), "rb") as fh:
                data = fh.read()
            self.put(digest, data)  # checks the digest: the file did not change since `pack`
            out[digest] = data
        return out


Source = Callable[[str], bytes | Path]  # a digest -> its bytes, or a file that holds them


def materialize(tree: Tree, dst: Path | str, source: Source) -> None:
    """Build `tree` as the new folder `dst` (see `sync`)."""
    sync(tree, dst, source, None)


def sync(tree: Tree, dst: Path | str, source: Source, held: Tree | None) -> None:
    """Make the folder `dst` hold `tree`: folders, files copied from `source` (each checked
    against its digest as it is written: `Corrupt` otherwise), links; then the permission bits,
    folders last (a 0o555 folder is filled first). `held`: the tree `dst` holds now, as the
    caller packed it and nothing has changed it since (its own folder): only what differs is
    removed and written, so a workspace that comes back as it went costs no write. None: `dst`
    is built anew (whatever is there goes)."""
    d = _b(dst)
    for rel, kind, _mode, _data in tree.entries:
        if rel.startswith(b"/") or b".." in rel.split(b"/") or kind not in (DIR, FILE, LINK):
            raise Corrupt(f"an entry {shown(rel)!r} ({kind!r}) is not one of a tree")
    if held is None or not os.path.isdir(d):
        remove_tree(Path(os.fsdecode(d)), best_effort=False)
        os.mkdir(d, 0o700)
        had: dict[bytes, Entry] = {}
    else:
        had = {e[0]: e for e in held.entries}
    want = {e[0]: e for e in tree.entries}
    keep = {p for p, e in had.items() if p in want and want[p][1:] == e[1:]
            or p in want and want[p][1] == e[1] == DIR}
    for p in (b"", *(p for p in keep if want[p][1] == DIR)):  # writable while it changes
        os.chmod(os.path.join(d, p) if p else d, 0o700)
    # what is written from a file here is read first: the file may be one that goes below
    fetched = {e[3]: source(e[3]) for p, e in want.items() if e[1] == FILE and p not in keep}
    fetched = {k: (v.read_bytes() if isinstance(v, Path) and held is not None else v)
               for k, v in fetched.items()}
    for p in sorted(set(had) - keep, key=lambda p: -p.count(b"/")):  # deepest first
        target = os.path.join(d, p)
        if os.path.lexists(target):
            if had[p][1] == DIR and not os.path.islink(target):
                remove_tree(Path(os.fsdecode(target)), best_effort=False)
            else:
                os.unlink(target)
    folders: list[tuple[bytes, int]] = [(d, tree.mode)]
    files: list[tuple[bytes, int]] = []
    for rel, kind, mode, data in tree.entries:
        target = os.path.join(d, rel)
        if kind == DIR:
            if rel not in keep:
                os.mkdir(target, 0o700)
            folders.append((target, mode))
        elif rel in keep:
            continue
        elif kind == LINK:
            os.symlink(os.fsencode(data), target)
        else:
            _write(target, data, fetched[data])
            files.append((target, mode))
    for target, mode in files:
        os.chmod(target, mode)
    for target, mode in reversed(folders):
        os.chmod(target, mode)


def _write(target: bytes, digest: str, src: bytes | Path) -> None:
    h = hashlib.sha256()
    with open(target, "xb") as out:
        if isinstance(src, bytes):
            h.update(src)
            out.write(src)
        else:
            with open(src, "rb") as fh:
                while chunk := fh.read(_CHUNK):
                    h.update(chunk)
                    out.write(chunk)
    if h.hexdigest() != digest:
        with contextlib.suppress(OSError):
            os.unlink(target)
        raise Corrupt(f"{shown(target)}: its bytes do not hash to {digest[:12]}...")


__all__ = ["DIR", "FILE", "LINK", "BlobStore", "Corrupt", "Entry", "Source", "Tree",
           "TreeRefused", "materialize", "mirror", "pack", "read_blobs", "sha256_of", "sync"]
