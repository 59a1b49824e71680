"""Hypothesis strategies and settings shared by the property tests: streams of records as the
device ops write them (tests/support/reference_encoder.py encodes them), direct and ring lanes.

Anchors and gaps crowd the places where decoding is hard (the low 32 bits about to wrap, gaps one
wrap short); a few event ids make nesting, overlap and unmatched records likely.
"""

from __future__ import annotations

import advise_inputs as ai
from hypothesis import HealthCheck
from hypothesis import strategies as st
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream

from sm_profiler.wire import format as fmt

U32 = 1 << 32
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Anchors: anywhere, or within a few ns of a multiple of 2**32 (the low word about to wrap).
anchors = st.one_of(
    st.integers(1, 1 << 62),
    st.builds(lambda k, off: max(1, k * U32 + off), st.integers(1, 1 << 28), st.integers(-64, 64)),
)
# Gaps between consecutive records of a lane: tiny, just under 2**32 (one wrap short), or any.
gaps = st.one_of(
    st.integers(0, 16),
    st.integers(U32 - 17, U32 - 1),
    st.integers(0, U32 - 1),
)
# A few event ids make nesting, overlap and unmatched records likely; the extremes stay in play.
event_ids = st.one_of(
    st.integers(0, 3), st.sampled_from([0, 1, fmt.MAX_EVENT_ID]), st.integers(0, 4095)
)
kinds = st.sampled_from([BEGIN, BEGIN, END, END, INSTANT])


@st.composite
def nested(draw, depth: int = 0) -> list[tuple[int, int]]:
    """A well-nested sequence of (kind, event): begin, children, end; instants in between."""
    out: list[tuple[int, int]] = []
    for _ in range(draw(st.integers(0, 3 if depth < 6 else 0))):
        if draw(st.booleans()):
            ev = draw(event_ids)
            out.append((BEGIN, ev))
            out.extend(draw(nested(depth + 1)))
            out.append((END, ev))
        else:
            out.append((INSTANT, draw(event_ids)))
    return out


@st.composite
def overlapping(draw) -> list[tuple[int, int]]:
    """Ranges of different ids that overlap without nesting: B a, B b, E a, E b, ..."""
    ids = draw(st.lists(event_ids, min_size=2, max_size=4, unique=True))
    out = [(BEGIN, e) for e in ids]
    out += [(END, e) for e in draw(st.permutations(ids))]
    return out


kind_sequences = st.one_of(
    st.lists(st.tuples(kinds, event_ids), max_size=24),  # anything: unmatched, odd nesting
    nested(),
    overlapping(),
    st.lists(st.one_of(nested(), overlapping()), max_size=3).map(lambda xs: sum(xs, [])),
)


@st.composite
def lanes(draw, capacity: int) -> Lane:
    anchor = draw(anchors)
    seq = draw(kind_sequences)
    # Sometimes overflow: the capacity is drawn independently of the sequence length.
    t, records = anchor, []
    for kind, ev in seq:
        t += draw(gaps)
        records.append((kind, ev, t))
    return Lane(anchor_ns=anchor, sm_id=draw(st.integers(0, 1023)), records=records)


@st.composite
def streams(draw) -> Stream:
    nb = draw(st.integers(1, 4))
    ng = draw(st.integers(1, 3))
    cap = draw(st.one_of(st.integers(1, 6), st.integers(7, 40)))
    present = draw(st.lists(st.booleans(), min_size=nb * ng, max_size=nb * ng))
    lanes_ = {}
    for i, p in enumerate(present):
        if p:
            lanes_[(i // ng, i % ng)] = draw(lanes(cap))
    flags = draw(st.sampled_from([0, fmt.FLAG_EMULATED]))
    return Stream(nb, ng, cap, lanes_, flags)


# -- ring lanes: long sequences, most lanes wrap ---------------------------------------------


@st.composite
def ring_lanes(draw, capacity: int) -> Lane:
    anchor = draw(anchors)
    # Long sequences: most lanes wrap, some several times.
    seq = sum(draw(st.lists(kind_sequences, min_size=1, max_size=6)), [])
    t, records = anchor, []
    for kind, ev in seq:
        t += draw(gaps)
        records.append((kind, ev, t))
    assume_nonempty = records or [(INSTANT, draw(event_ids), anchor + 1)]
    return Lane(
        anchor_ns=anchor,
        sm_id=draw(st.integers(0, 1023)),
        records=assume_nonempty,
        close_ns=assume_nonempty[-1][2] + draw(st.integers(0, (1 << 32) - 1)),
    )


@st.composite
def ring_streams(draw) -> Stream:
    nb, ng = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    cap = 1 << draw(st.integers(0, 4))
    lanes_ = {}
    for i in range(nb * ng):
        if draw(st.booleans()):
            lanes_[(i // ng, i % ng)] = draw(ring_lanes(cap))
    return Stream(nb, ng, cap, lanes_, fmt.FLAG_RING)


# -- auto tables for the advisor ------------------------------------------------------------------


@st.composite
def advise_tables(draw):
    """Random small auto tables for the advisor (advise_inputs.make_table): up to 3 steps of up
    to 4 launches on 1-2 ranks (ranks that recorded different steps among them), programs of
    random SMs, starts and lengths (some zero)."""
    n_ranks = draw(st.integers(1, 2))
    sms = draw(st.integers(1, 6))
    per_rank = []
    for _ in range(n_ranks):
        launches = []
        t = 0
        for k in range(draw(st.integers(0, 3))):
            for _ in range(draw(st.integers(1, 4))):
                n = draw(st.integers(1, 9))
                progs = []
                for _ in range(n):
                    s = t + draw(st.integers(0, 300))
                    progs.append((draw(st.integers(0, sms - 1)), s, s + draw(st.integers(0, 500))))
                launches.append(ai.launch(progs, draw(st.sampled_from("abc")), step=k))
                t += draw(st.integers(0, 600))
            t += draw(st.integers(0, 400))
        per_rank.append(launches)
    if n_ranks == 1 or not all(per_rank):
        return ai.make_table(per_rank[0], sm_count=sms)
    return ai.ranks_table(per_rank, sm_count=sms)
