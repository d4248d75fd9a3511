"""Caesar cipher over lowercase letters; the specification says the shift is 4."""

SHIFT = 12


def encode(text: str) -> str:
    return "".join(chr((ord(c) - 97 + SHIFT) % 26 + 97) if c.islower() else c for c in text)


def decode(text: str) -> str:
    return "".join(chr((ord(c) - 97 - SHIFT) % 26 + 97) if c.islower() else c for c in text)
