"""Which tokens each rank of a calibrated pass holds, what it holds at each
step, and which (query, key) blocks a step computes, for the striped and
double-ring programs of calibrate.py.  No torch here: the index logic is
tested on a machine without a GPU (tests/test_calibrate_layouts.py).

A block is (q_lo, q_hi, key row ranges [(a, b)], causal) in the rank's
local rows; the causal blocks here are square (as many queries as keys),
where flash attention's top-left and bottom-right causal masks agree.

Striped attention (Brandon et al. 2023, arXiv 2311.09431; ring_flash_attn's
stripe_flash_attn_func): rank i holds tokens i, i+N, i+2N, ...; KV moves
around one ring, so at step s rank i holds rank (i - s) mod N's KV.  Local
row p of rank i is token p N + i, so under a causal mask key row r of rank
j is seen by query row p when r <= p (j <= i) or r < p (j > i): a causal
c x c block with its diagonal, or the block q[1:] x k[:-1] (the public
code's two calls).

Double ring (LoongTrain, Gu et al. 2024, arXiv 2406.18485 sec. 4.2;
InternEvo's zigzag_double_ring_flash_attn): N = w x o ranks as o windows of
w consecutive ranks.  A round is w steps: the KV a rank starts the round
with moves w - 1 hops around the inner ring of its window ((b, p) to
(b, p + 1)); the round-start KV itself goes one hop across, to the same
place of the next window ((b, p) to (b + 1, p)), sent when the round
starts and awaited when the next one starts.  At step t = j w + s rank
(b, p) holds the KV of rank (b - j, p - s).  The layout is Zigzag-Ring's
(chunks g and 2N-1-g of 2N on rank g) and so are the blocks, by the global
ranks of the query's and the key's holders."""


def stripe_tokens(rank, n, c):
    """The global tokens of a striped rank, in its local order."""
    return [p * n + rank for p in range(c)]


def stripe_block(rank, src, c):
    """The causal block of the KV of rank src on rank `rank`."""
    if src <= rank:
        return (0, c, [(0, c)], True)
    return (1, c, [(0, c - 1)], True)


def ring_source(rank, n, step):
    return (rank - step) % n


def zigzag_tokens(rank, n, c):
    """Zigzag-Ring's layout: chunks rank and 2n-1-rank of c/2 tokens."""
    h = c // 2
    return (list(range(rank * h, (rank + 1) * h))
            + list(range((2 * n - 1 - rank) * h, (2 * n - rank) * h)))


def zigzag_blocks(rank, src, c):
    """Zigzag-Ring's blocks (ring_flash_attn's zigzag_ring_flash_attn_forward)
    of the KV of rank src on rank `rank`: its own KV causal; an earlier
    rank's first half against every query; a later rank's whole KV against
    the second half of the queries."""
    h = c // 2
    if src == rank:
        return [(0, c, [(0, c)], True)]
    if src < rank:
        return [(0, c, [(0, h)], False)]
    return [(h, c, [(0, c)], False)]


def double_ring_windows(n, w):
    """(windows, places): the windows of w consecutive ranks, and the
    across-window rings of the ranks at one place."""
    if w < 1 or n % w:
        raise ValueError(f"double ring: the inner ring's size {w} does not divide {n} ranks")
    o = n // w
    return ([list(range(b * w, (b + 1) * w)) for b in range(o)],
            [list(range(p, n, w)) for p in range(w)])


def double_ring_source(rank, n, w, step):
    """The rank whose KV `rank` holds at step t = j w + s: (b - j, p - s)."""
    o = n // w
    b, p = divmod(rank, w)
    j, s = divmod(step, w)
    return ((b - j) % o) * w + (p - s) % w


def double_ring_inner_default(n):
    """The largest inner ring that leaves two windows or more (n = 4: 2);
    a prime n: 1 (every hop across)."""
    return max(u for u in range(1, n) if n % u == 0) if n > 1 else 1


def block_pairs(tokens_q, tokens_k, block):
    """The (query token, key token) pairs a block computes; a causal mask
    bottom-right aligned, as PyTorch's flash kernel applies it when the
    block has fewer queries than keys."""
    q_lo, q_hi, segs, causal = block
    keys = [k for a, b in segs for k in range(a, b)]
    shift = len(keys) - (q_hi - q_lo)
    pairs = []
    for i, qi in enumerate(range(q_lo, q_hi)):
        for j, kj in enumerate(keys):
            if causal and j > i + shift:
                continue
            pairs.append((tokens_q[qi], tokens_k[kj]))
    return pairs
