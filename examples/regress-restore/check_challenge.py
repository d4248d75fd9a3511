"""Challenge suite (admission only, never shown to the worker): wrap-around and round trip."""
import os
import sys

sys.path.insert(0, os.getcwd())
from caesar import decode, encode  # noqa: E402

ok = encode("xyz") == "bcd" and decode(encode("hello world")) == "hello world"
sys.exit(0 if ok else 1)
