"""A CPU model of issue 9's window pair (S=32768, D=128, B=1, H=32, causal, with and without a 4k left window) on
the Gluon kernel's persistent schedule: each 128-row query block costs its 256-key tiles, plus `--masked` of a tile
for each masked one and a fixed `--block-cost` (in tiles) for the block's start and end; blocks are dealt to the
programs round robin in the kernel's causal order (sections of heads, within a section the last query blocks
first: gluon_schedule._tile_order). Prints the modelled time ratio full causal / window for the static schedule,
for a greedy dynamic one (each block to the least-loaded program), and without imbalance, per block cost.

    python3 bench/model_window_schedule.py [--block-cost 1.17,0.9,0.5] [--masked 0.3]

A model, not a measurement: it says which per-block cost the 3.8x target needs if tiles cost the same in both
calls (they do not quite: the two run at different clocks on a power-limited card, docs/perf/NOTES.md).
"""

import argparse
import heapq

SEQLEN, HEADS, BLOCK_M, BLOCK_N, WINDOW_LEFT, PROGRAMS, SECTION_HEADS = 32768, 32, 128, 256, 4095, 132, 2


def block_tiles(m0, window):
    """(tiles visited, tiles masked) of the query block starting at row m0."""
    lo = max(0, m0 - WINDOW_LEFT) if window else 0
    hi = m0 + BLOCK_M - 1
    first, last = lo // BLOCK_N, hi // BLOCK_N
    masked = 0
    for t in range(first, last + 1):
        k0, k1 = t * BLOCK_N, t * BLOCK_N + BLOCK_N - 1
        # Visible to every row of the block: inside [r - WINDOW_LEFT, r] for its first and last row.
        visible = all((max(0, r - WINDOW_LEFT) if window else 0) <= k0 and k1 <= r for r in (m0, m0 + BLOCK_M - 1))
        masked += not visible
    return last - first + 1, masked


def schedule(window):
    """The blocks in the kernel's causal order (two heads of 8 MB K and V a section at this size)."""
    blocks = SEQLEN // BLOCK_M
    order = []
    for first in range(0, HEADS, SECTION_HEADS):
        heads = min(SECTION_HEADS, HEADS - first)
        for r in range(blocks * heads):
            order.append(block_tiles((blocks - 1 - r // heads) * BLOCK_M, window))
    return order


def makespans(costs):
    static = [0.0] * PROGRAMS
    for i, c in enumerate(costs):
        static[i % PROGRAMS] += c
    heap = [(0.0, p) for p in range(PROGRAMS)]
    for c in costs:
        load, p = heapq.heappop(heap)
        heapq.heappush(heap, (load + c, p))
    return max(static), max(load for load, _ in heap), sum(costs) / PROGRAMS


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--block-cost", default="1.5,1.17,0.9,0.7,0.5", help="per-block fixed cost in tiles, a list")
    ap.add_argument("--masked", type=float, default=0.3, help="a masked tile's extra cost in tiles")
    args = ap.parse_args()
    full, local = schedule(False), schedule(True)
    print("block cost  static  dynamic  balanced   (full causal / window)")
    for c in (float(x) for x in args.block_cost.split(",")):
        f = makespans([n + args.masked * m + c for n, m in full])
        w = makespans([n + args.masked * m + c for n, m in local])
        print(f"{c:10.2f}  {f[0] / w[0]:6.3f}  {f[1] / w[1]:7.3f}  {f[2] / w[2]:8.3f}")


if __name__ == "__main__":
    main()
