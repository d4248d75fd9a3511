"""Could these bytes after a ledger's last newline be a write a crash cut short?

The recovery rule (docs/ledger.md#torn-tails-the-recovery-rule) cuts only such bytes: a *strict prefix of a record
line*, then zero padding (a block the file system allocated but never filled). Anything else
there, and any newline-terminated line that fails a check, is corruption, never cut.

Why a prefix check and not a guess: every line the engine writes is `canonical(record) + "\\n"`
(sort_keys, no whitespace, ensure_ascii=False, every control character escaped), so a record
cut short is a prefix of one JSON object in that form: valid UTF-8 (up to a multi-byte sequence
cut at the end), no byte below 0x20, no space outside a string, tokens in JSON's grammar, at most
`MAX_DEPTH` deep, and nothing after the object closes. A complete object with only its newline
missing is still a strict prefix of its line.

Linear time: the tokens are matched by compiled expressions (a 32 MB string is one match, run in
C; so is a run of `"key":scalar,`); the grammar walks the tokens with an explicit stack, so 100k
`[` never recurse. The walk covers the first `GRAMMAR_CHARS` of a tail (a hostile tail of small
tokens would otherwise cost about a microsecond per token); past that only the byte checks (UTF-8,
no control byte) hold, so a garbage end of a tail longer than 256 KiB that starts like a record is
classed as torn. That costs no record: a torn tail is cut only above the committed point and
its bytes are kept in a side file.
"""

from __future__ import annotations

import codecs
import re

MAX_DEPTH = 1000  # json.dumps (canonical) cannot write deeper than Python's recursion limit
GRAMMAR_CHARS = 1 << 18  # the grammar walks this much of a tail; the rest gets the byte checks
_CONTROL = re.compile(r"[\x00-\x1f]")

_STR = r'"(?:[^"\\\x00-\x1f]++|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+"'
_NUM = r"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][-+]?[0-9]++)?"
_TOKEN = re.compile(rf"({_STR})|({_NUM})|(true|false|null)|([{{}}\[\]:,])")
# runs of `"key":scalar,` in an object and `scalar,` in an array, matched in C: a long flat tail
# costs one step of the walk below, not one per token
_SCALAR = rf"(?:{_STR}|{_NUM}|true|false|null|\[\]|\{{\}})"
_MEMBERS = re.compile(rf"(?:{_STR}:{_SCALAR},)++")
_ITEMS = re.compile(rf"(?:{_SCALAR},)++")
# the last token, cut short (each alternative may stop anywhere before its end)
_PART_STR = re.compile(r'"(?:[^"\\\x00-\x1f]++|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+'
                       r"(?:\\(?:u[0-9a-fA-F]{0,3})?)?")
_PART_VALUE = re.compile(r"-?(?:(?:0|[1-9][0-9]*+)(?:\.(?:[0-9]++(?:[eE][-+]?[0-9]*+)?)?"
                         r"|[eE][-+]?[0-9]*+)?)?|t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?"
                         r"|n(?:u(?:ll?)?)?")

# what the grammar expects next
_FIRST, _VALUE, _KEY_OR_CLOSE, _KEY, _COLON, _COMMA_OR_CLOSE, _VALUE_OR_CLOSE, _END = range(8)


def is_cut_short(tail: bytes) -> bool:
    """True when `tail` (bytes after the last newline, none itself) is zero padding, or a strict
    prefix of a canonical record line followed by zero padding."""
    body = tail.rstrip(b"\x00")
    if not body:
        return True
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        text = decoder.decode(body, final=False)
    except UnicodeDecodeError:
        return False
    if decoder.getstate()[0]:  # a character cut short: only a string may hold one (any
        text += "\u00e9"       # non-ASCII character stands for it)
    if len(text) <= GRAMMAR_CHARS:
        return _json_prefix(text)
    # a prefix of a prefix is a prefix: the grammar on the first part, the bytes of the rest
    return _json_prefix(text[:GRAMMAR_CHARS]) and _CONTROL.search(text, GRAMMAR_CHARS) is None


def _json_prefix(text: str) -> bool:
    """Is `text` a prefix (possibly all) of one JSON object with no whitespace outside strings?"""
    stack: list[str] = []
    expect = _FIRST
    pos, n = 0, len(text)
    match = _TOKEN.match
    value_start = 0  # where the last token that was a number began
    last_number = False
    while pos < n:
        if expect in (_KEY, _KEY_OR_CLOSE):
            run = _MEMBERS.match(text, pos)
            if run is not None:
                pos, expect, last_number = run.end(), _KEY, False
                continue
        elif expect in (_VALUE, _VALUE_OR_CLOSE) and stack and stack[-1] == "[":
            run = _ITEMS.match(text, pos)
            if run is not None:
                pos, expect, last_number = run.end(), _VALUE, False
                continue
        m = match(text, pos)
        if m is None:
            break
        string, number, literal, punct = m.groups()
        if punct is None:
            if expect in (_VALUE, _VALUE_OR_CLOSE):
                expect = _COMMA_OR_CLOSE
            elif string is not None and expect in (_KEY, _KEY_OR_CLOSE):
                expect = _COLON
            else:
                return False
        elif punct in "{[":
            if expect not in (_FIRST, _VALUE, _VALUE_OR_CLOSE) or (expect == _FIRST and punct != "{"):
                return False
            stack.append(punct)
            if len(stack) > MAX_DEPTH:
                return False
            expect = _KEY_OR_CLOSE if punct == "{" else _VALUE_OR_CLOSE
        elif punct in "}]":
            want = "{" if punct == "}" else "["
            if not stack or stack[-1] != want or expect not in (
                    _COMMA_OR_CLOSE, _KEY_OR_CLOSE if want == "{" else _VALUE_OR_CLOSE):
                return False
            stack.pop()
            expect = _COMMA_OR_CLOSE if stack else _END
        elif punct == ":":
            if expect != _COLON:
                return False
            expect = _VALUE
        else:  # ","
            if expect != _COMMA_OR_CLOSE:
                return False
            expect = _KEY if stack[-1] == "{" else _VALUE
        last_number = number is not None
        value_start = pos
        pos = m.end()
    if pos == n:
        return True
    # the rest must be the last token cut short: a string (key or value) or another value
    # (a number such as `1.` or `1e+` extends the number token just matched)
    start = value_start if last_number and expect == _COMMA_OR_CLOSE else pos
    if _PART_VALUE.fullmatch(text, start) is not None:
        return start != pos or expect in (_VALUE, _VALUE_OR_CLOSE)
    return (_PART_STR.fullmatch(text, pos) is not None
            and expect in (_VALUE, _VALUE_OR_CLOSE, _KEY, _KEY_OR_CLOSE))
