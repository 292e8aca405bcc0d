#!/usr/bin/env python3
"""scripts/calibrate/layouts.py: the striped and double-ring pass programs
of calibrate.py compute every causal (query, key) pair exactly once and no
masked one, each rank's tokens are the sequence split without overlap, and
the double ring's hops deliver to every rank the KV the schedule says it
holds next (checked without a GPU; the programs themselves are checked
against autograd on the GPUs before they are timed)."""
from collections import Counter

from pycheck import check, finish, scripts_on_path  # noqa: E402

scripts_on_path("calibrate")
import layouts  # noqa: E402


def causal_coverage(n, c, tokens, source, blocks):
    """Counter of (query, key) pairs over every rank and step, and whether
    the ranks' tokens partition the sequence."""
    held = [tokens(r) for r in range(n)]
    partition = sorted(t for h in held for t in h) == list(range(n * c))
    seen = Counter()
    for r in range(n):
        for step in range(n):
            src = source(r, step)
            for blk in blocks(r, src):
                seen.update(layouts.block_pairs(held[r], held[src], blk))
    return seen, partition


def exactly_causal(seen, S):
    want = {(q, k) for q in range(S) for k in range(q + 1)}
    return set(seen) == want and all(v == 1 for v in seen.values())


# striped attention, every rank count and an odd chunk length too
for n in (1, 2, 3, 4, 8):
    for c in (1, 4, 5):
        seen, part = causal_coverage(
            n, c, lambda r: layouts.stripe_tokens(r, n, c),
            lambda r, s: layouts.ring_source(r, n, s),
            lambda r, src: [layouts.stripe_block(r, src, c)])
        check(f"stripe n={n} c={c}: tokens partition the sequence", part)
        check(f"stripe n={n} c={c}: each causal pair once, none masked",
              exactly_causal(seen, n * c))
        # every step's block is nearly the same size on every rank (the
        # method's point): c(c+1)/2 or c(c-1)/2 pairs
        sizes = {len(layouts.block_pairs(list(range(c)), list(range(c)),
                                         layouts.stripe_block(r, src, c)))
                 for r in range(n) for src in range(n)}
        check(f"stripe n={n} c={c}: blocks of c(c+1)/2 or c(c-1)/2 pairs",
              sizes <= {c * (c + 1) // 2, c * (c - 1) // 2})

# the zigzag layout, with the ring's and the double ring's visiting orders
for n in (2, 3, 4, 6, 8):
    for w in [u for u in range(1, n + 1) if n % u == 0]:
        c = 4
        seen, part = causal_coverage(
            n, c, lambda r: layouts.zigzag_tokens(r, n, c),
            lambda r, s: layouts.double_ring_source(r, n, w, s),
            lambda r, src: layouts.zigzag_blocks(r, src, c))
        check(f"double ring n={n} w={w}: zigzag tokens partition the sequence", part)
        check(f"double ring n={n} w={w}: each causal pair once, none masked",
              exactly_causal(seen, n * c))
        srcs = [sorted(layouts.double_ring_source(r, n, w, s) for s in range(n))
                for r in range(n)]
        check(f"double ring n={n} w={w}: every rank holds every KV once",
              all(x == list(range(n)) for x in srcs))
        # the hops: an inner step's KV comes from the previous place of the
        # window (what it held a step ago); a round's first KV comes across
        # from the same place of the previous window (what that rank started
        # its round with)
        windows, places = layouts.double_ring_windows(n, w)
        ok = True
        for r in range(n):
            b, p = divmod(r, w)
            for t in range(1, n):
                j, s = divmod(t, w)
                if s:
                    prev = windows[b][(p - 1) % w]
                    ok &= layouts.double_ring_source(r, n, w, t) == \
                        layouts.double_ring_source(prev, n, w, t - 1)
                else:
                    prev = places[p][(b - 1) % (n // w)]
                    ok &= layouts.double_ring_source(r, n, w, t) == \
                        layouts.double_ring_source(prev, n, w, t - w)
        check(f"double ring n={n} w={w}: inner and across hops carry the KV held next", ok)
        # one window: Zigzag-Ring's ring order exactly
        if w == n:
            check(f"double ring n={n} w=n: the ring's order",
                  all(layouts.double_ring_source(r, n, w, s) == layouts.ring_source(r, n, s)
                      for r in range(n) for s in range(n)))

check("double ring: 4 ranks default to inner rings of 2",
      layouts.double_ring_inner_default(4) == 2)
check("double ring: 8 ranks default to inner rings of 4",
      layouts.double_ring_inner_default(8) == 4)
try:
    layouts.double_ring_windows(6, 4)
    check("double ring: an inner size not dividing the ranks is refused", False)
except ValueError as e:
    check("double ring: an inner size not dividing the ranks is refused", "4" in str(e))

finish("")
