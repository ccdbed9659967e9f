"""Loops in SASS text: the instructions of a cubin's disassembly and the body of each loop (a predicated backward
branch's), for the build's checks (operations/fmha_fwd.py check_sass) and codegen/compile_variant.py's summary."""

import re
from collections import Counter

_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
_BRANCH = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")


def instructions(sass):
    """[(address, opcode, line)] of the SASS, in order."""
    out = []
    for line in sass.splitlines():
        m = _INSTR.search(line)
        if m:
            out.append((int(m[1], 16), m[3], line))
    return out


def loops(instrs):
    """(start, end, Counter of opcodes' first word) for each loop: the body from a back edge's target to it."""
    found = []
    for address, op, line in instrs:
        # A loop's back edge is predicated; the unconditional backward branches are the out-of-line retry paths of
        # mbarrier waits (placed after the kernel's end), which jump back into the code they left, and the
        # warp-specialized partitions' dispatch.
        if op != "BRA" or not _INSTR.search(line)[2]:
            continue
        m = _BRANCH.search(line)
        if not m:
            continue
        target = int(m[1], 16)
        if target < address:
            body = Counter(o.split(".")[0] for a, o, _ in instrs if target <= a <= address)
            found.append((target, address, body))
    return found


MMA_OPS = ("QGMMA", "HGMMA", "IGMMA")


def innermost_mma_loops(sass):
    """The loops that issue wgmma and hold no other such loop: the attention kernels' key-tile loops, one per
    consumer partition. [(start, end, Counter)]."""
    with_mma = [lp for lp in loops(instructions(sass)) if sum(lp[2][o] for o in MMA_OPS)]
    return [lp for lp in with_mma
            if not any(o is not lp and lp[0] <= o[0] and o[1] <= lp[1] for o in with_mma)]
