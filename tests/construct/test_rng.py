"""Seeded streams' helpers the builder uses to go faster: each must draw and format exactly as the
plain way does (the same seed gives the same bytes)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from iba.construct.rng import ChangingWeights, iso, iso_after


def test_changing_weights_draw_what_rng_choices_draws():
    """The same index as rng.choices(range(n), weights=w) from the same stream, while weights change
    one at a time (zeros included: never drawn)."""
    picks = random.Random(3)
    for trial in range(300):
        n = picks.randrange(1, 40)
        w = [picks.choice([0, 0, 1, 2, 3, 5, 17, 1000]) for _ in range(n)]
        w[picks.randrange(n)] = 1
        fast = ChangingWeights(w)
        a, b = random.Random(trial), random.Random(trial)
        for _ in range(40):
            assert fast.total == sum(w)
            if fast.total:
                got = fast.draw(b)
                assert got == a.choices(range(n), weights=w, k=1)[0]
                assert w[got] > 0
            i, v = picks.randrange(n), picks.choice([0, 1, 2, 4, 9])
            w[i] = v
            fast.set(i, v)


def test_iso_after_formats_what_adding_seconds_formats():
    rng = random.Random(1)
    for tz in (timezone.utc, timezone(timedelta(hours=-5)), None):
        for _ in range(2000):
            start = datetime(2025, 1, 6, tzinfo=tz) + timedelta(days=rng.randrange(400), minutes=rng.randrange(1440))
            offsets = sorted(rng.randrange(30_000) for _ in range(8))  # some runs past midnight
            assert iso_after(start, offsets) == [iso(start + timedelta(seconds=o)) for o in offsets]
    odd = datetime(2025, 3, 1, 10, 0, 0, 500_000, tzinfo=timezone.utc)  # not whole seconds: the general way
    assert iso_after(odd, [0, 61]) == [iso(odd), iso(odd + timedelta(seconds=61))]
