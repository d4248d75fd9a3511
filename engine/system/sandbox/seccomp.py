"""The seccomp filter every bubblewrap sandbox runs under: no kernel keyrings.

Why: a kernel keyring is not a file, so no mount hides it. The engine user's keyrings (its
session keyring, and the per-user keyring every process of that uid shares) may hold the
operator's tokens (`keyctl padd user token @u`), and a key a worker adds there outlives its
attempt. The namespaces do not separate them (bwrap creates no user namespace), so the filter
refuses the three keyring calls, `add_key`, `request_key` and `keyctl`, with EPERM, as container
runtimes do; everything else is allowed.

The filter is classic BPF over `struct seccomp_data` (syscall number at offset 0, audit arch at
4), one block per architecture a process on this host may run as (x86_64 with x32, i386, aarch64,
arm), handed to bwrap (`--seccomp FD`) through a pipe.
"""

from __future__ import annotations

import errno
import functools
import os
import struct

# audit arch -> numbers of add_key, request_key, keyctl
KEYRING_CALLS: dict[int, tuple[int, ...]] = {
    0xC000003E: (248, 249, 250),  # x86_64; x32 uses the same numbers with bit 30 set
    0x40000003: (286, 287, 288),  # i386 (runs on an x86_64 host)
    0xC00000B7: (217, 218, 219),  # aarch64
    0x40000028: (309, 310, 311),  # arm (runs on an aarch64 host)
}
X32_BIT = 0x40000000
LD_ABS, JEQ, AND, RET = 0x20, 0x15, 0x54, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, ALU|AND|K, RET|K
ALLOW, DENY = 0x7FFF0000, 0x00050000 | errno.EPERM  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO|EPERM


@functools.cache
def keyring_filter() -> bytes:
    """The filter as bwrap reads it: `struct sock_filter` records in native byte order (built
    once per process: the same bytes for every sandbox, and every attempt launches two)."""
    prog: list[list[int]] = [[LD_ABS, 0, 0, 4]]  # the audit arch
    to_deny: list[int] = []  # indexes of the jumps to DENY, patched once its place is known
    for arch, calls in KEYRING_CALLS.items():
        body: list[list[int]] = [[LD_ABS, 0, 0, 0]]  # the syscall number
        if arch == 0xC000003E:
            body.append([AND, 0, 0, 0xFFFFFFFF ^ X32_BIT])
        body += [[JEQ, 0, 0, nr] for nr in calls]
        body.append([RET, 0, 0, ALLOW])
        prog.append([JEQ, 0, len(body), arch])  # another arch: skip this block
        start = len(prog)
        prog += body
        to_deny += [start + i for i, ins in enumerate(body) if ins[0] == JEQ]
    prog.append([RET, 0, 0, ALLOW])  # an arch not listed
    deny = len(prog)
    prog.append([RET, 0, 0, DENY])
    for i in to_deny:
        prog[i][1] = deny - i - 1
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


def filter_fd() -> int:
    """A pipe's read end holding the filter (its write end closed): pass it to bwrap, which
    reads it to the end before it starts the command; close it after bwrap has started."""
    r, w = os.pipe()
    try:
        os.write(w, keyring_filter())  # ~30 records, far below a pipe's buffer
    finally:
        os.close(w)
    return r
