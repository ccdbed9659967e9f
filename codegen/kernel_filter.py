"""Kernel-name filters with CUTLASS semantics (the C++ twin is src/kernel_filter.cpp).

',' separates alternatives (OR). Inside one alternative, '*' splits it into substrings that must all
occur in the name, in that order. An empty filter matches everything.
"""


def matches_filter(name: str, filter_text: str) -> bool:
    if not filter_text:
        return True
    for alternative in filter_text.split(","):
        alternative = alternative.strip()
        if not alternative:
            continue
        pos = 0
        for part in alternative.split("*"):
            found = name.find(part, pos)
            if found < 0:
                break
            pos = found + len(part)
        else:
            return True
    return False
