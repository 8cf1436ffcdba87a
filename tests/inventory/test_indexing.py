"""The index methodology (inventory.indexing), pure: worked examples and hypothesis properties."""

from __future__ import annotations

import random
from datetime import date, timedelta
from decimal import Decimal
from itertools import count

from hypothesis import given, settings
from hypothesis import strategies as st

from core.money import round_rate
from inventory.indexing import (
    FIXED,
    INELIGIBLE,
    INSUFFICIENT_SOURCES,
    OUTLIER,
    STALE,
    SUPERSEDED,
    Observation,
    Parameters,
    fix,
    fixing_from_inputs,
    independence_key,
    outlier_band,
    weighted_median,
)

DAY = date(2025, 6, 10)
D = Decimal


def quote(
    id: int,
    rate: str,
    *,
    source: int,
    owner: str | None = None,
    days_before: int = 0,
    weight: str = "1",
    active: bool = True,
) -> Observation:
    """An observation of a registered source (owner defaults to one owner per source)."""
    return Observation(
        id=id,
        observed_on=DAY - timedelta(days=days_before),
        rate=D(rate),
        source_id=source,
        source=f"source-{source}",
        owner_key=owner or f"publisher:owner-{source}",
        weight=D(weight),
        active=active,
    )


def untied(id: int, rate: str) -> Observation:
    return Observation(id=id, observed_on=DAY, rate=D(rate), source="a provider's word")


# ------------------------------------------------------------------ worked examples


def test_three_independent_owners_fix_at_their_median() -> None:
    fixing = fix(
        day=DAY,
        observations=[
            quote(1, "3.10", source=1),
            quote(2, "3.20", source=2),
            quote(3, "3.40", source=3),
        ],
    )
    assert fixing.status == FIXED
    assert fixing.rate == D("3.200000")
    assert fixing.owner_count == 3
    assert fixing.dropped == ()
    assert fixing.explanation.startswith("Fixed at 3.200000: the weighted median of 3 votes")


def test_thirty_observations_of_one_source_are_one_vote() -> None:
    honest = [quote(1, "3.20", source=1), quote(2, "3.20", source=2), quote(3, "3.25", source=3)]
    flood = [quote(100 + n, "2.00", source=9, owner="org:9") for n in range(30)]
    fixing = fix(day=DAY, observations=honest + flood)
    assert fixing.owner_count == 4
    attacker = next(vote for vote in fixing.votes if vote.owner_key == "org:9")
    assert attacker.value == D("2.00") and len(attacker.observation_ids) == 30
    # 2.00 is far outside the band around the honest quotes: dropped as an outlier.
    assert not attacker.kept
    assert [drop.reason for drop in fixing.dropped] == [OUTLIER]
    assert fixing.rate == D("3.200000")


def test_observations_without_a_registered_active_source_count_for_nothing() -> None:
    fixing = fix(
        day=DAY,
        observations=[
            *[untied(n, "2.00") for n in range(1, 31)],
            quote(40, "3.20", source=1),
            quote(41, "3.20", source=2, active=False),
        ],
    )
    assert fixing.status == INSUFFICIENT_SOURCES
    assert fixing.rate is None
    assert fixing.owner_count == 1
    assert {drop.reason for drop in fixing.dropped} == {INELIGIBLE}
    assert len(fixing.dropped) == 31
    assert "No fixing: 1 independent owner" in fixing.explanation
    assert "at least 3 are needed" in fixing.explanation
    assert "31 observations ineligible" in fixing.explanation


def test_the_latest_day_of_each_source_counts_and_older_ones_are_superseded_or_stale() -> None:
    fixing = fix(
        day=DAY,
        observations=[
            quote(1, "9.00", source=1, days_before=3),  # superseded by id 2
            quote(2, "3.00", source=1, days_before=1),
            quote(3, "3.20", source=2, days_before=6),  # still in a 7-day window
            quote(4, "3.40", source=3),
            quote(5, "3.60", source=3),  # same day: the source's value is their median
            quote(6, "1.00", source=4, days_before=7),  # outside the window
        ],
    )
    assert fixing.rate == D("3.200000")
    by_owner = {vote.owner_key: vote for vote in fixing.votes}
    assert by_owner["publisher:owner-3"].value == D("3.50")
    assert [(drop.reason, drop.observation_ids) for drop in fixing.dropped] == [
        (STALE, (6,)),
        (SUPERSEDED, (1,)),
    ]


def test_sources_of_one_owner_are_combined_into_one_vote_as_heavy_as_the_heaviest() -> None:
    fixing = fix(
        day=DAY,
        observations=[
            quote(1, "3.00", source=1, owner="org:5", weight="1"),
            quote(2, "3.10", source=2, owner="org:5", weight="3"),
            quote(3, "3.20", source=3),
            quote(4, "3.30", source=4),
        ],
    )
    assert fixing.owner_count == 3
    vote = next(vote for vote in fixing.votes if vote.owner_key == "org:5")
    assert (vote.value, vote.weight) == (D("3.10"), D("3"))
    # Weighted median of 3.10 (w3), 3.20 (w1), 3.30 (w1): 3.10 holds 3 of 5.
    assert fixing.rate == D("3.100000")


def test_an_even_split_of_weight_takes_the_midpoint() -> None:
    fixing = fix(
        day=DAY,
        observations=[
            quote(n, rate, source=n) for n, rate in enumerate(["3", "3.1", "3.2", "3.3"])
        ],
    )
    assert fixing.rate == D("3.150000")


def test_the_fixing_rounds_half_up_to_six_places() -> None:
    observations = [
        quote(1, "1.000001", source=1),
        quote(2, "1.000002", source=1),
        quote(3, "1.000001", source=2),
        quote(4, "1.000002", source=2),
        quote(5, "1.000001", source=3),
        quote(6, "1.000002", source=3),
    ]
    assert fix(day=DAY, observations=observations).rate == D("1.000002")  # from 1.0000015


def test_mad_zero_keeps_a_quote_a_cent_off_and_drops_a_far_one() -> None:
    agreeing = [quote(n, "3.20", source=n) for n in range(1, 4)]
    near = fix(day=DAY, observations=[*agreeing, quote(9, "3.25", source=9)])
    assert all(vote.kept for vote in near.votes)  # band 3.2 +/- 3 x 1 % = 3.104 to 3.296
    far = fix(day=DAY, observations=[*agreeing, quote(9, "3.40", source=9)])
    assert [vote.owner_key for vote in far.votes if not vote.kept] == ["publisher:owner-9"]
    assert "outside 3.104000 to 3.296000" in far.explanation


def test_the_band_scales_with_the_spread_of_the_votes() -> None:
    low, high = outlier_band([D(3), D("3.2"), D("3.4"), D(4)], parameters=Parameters())
    # median 3.3, MAD 0.2, scale 1.4826 x 0.2 = 0.29652, reach 3 x 0.29652
    assert (low, high) == (D("3.3") - D("0.88956"), D("3.3") + D("0.88956"))


def test_fewer_owners_than_required_fix_nothing_and_the_minimum_is_a_parameter() -> None:
    two = [quote(1, "3.2", source=1), quote(2, "3.3", source=2)]
    assert fix(day=DAY, observations=two).status == INSUFFICIENT_SOURCES
    assert fix(day=DAY, observations=two, parameters=Parameters(min_owners=2)).rate == D("3.25")


def test_weighted_median() -> None:
    assert weighted_median([(D(1), D(1))]) == D(1)
    assert weighted_median([(D(1), D(1)), (D(2), D(1))]) == D("1.5")
    assert weighted_median([(D(1), D(1)), (D(2), D(2))]) == D(2)
    assert weighted_median([(D(5), D(1)), (D(1), D(1)), (D(3), D(1))]) == D(3)


def test_the_independence_key_normalises_publisher_names() -> None:
    assert independence_key(organization_id=7, owner_name="Anything") == "org:7"
    assert independence_key(organization_id=None, owner_name="  S&P   Global ") == (
        "publisher:s&p global"
    )
    assert independence_key(organization_id=None, owner_name="S&P GLOBAL") == (
        "publisher:s&p global"
    )


def test_a_stored_fixing_recomputes_from_its_inputs() -> None:
    fixing = fix(
        day=DAY,
        observations=[
            quote(1, "3.10", source=1),
            quote(2, "3.30", source=2, owner="org:2", weight="2.5"),
            quote(3, "3.40", source=3),
            quote(4, "9.99", source=4),
            untied(5, "1.00"),
        ],
    )
    again = fixing_from_inputs(fixing.inputs_json())
    assert (again.status, again.rate, again.dropped) == (
        fixing.status,
        fixing.rate,
        fixing.dropped,
    )
    assert again.inputs_json() == fixing.inputs_json()


# ------------------------------------------------------------------ properties

rates = st.decimals(min_value=D("0.01"), max_value=D("50"), places=6)
weights = st.sampled_from([D("0.5"), D("1"), D("1"), D("2"), D("3.25")])


@st.composite
def owners(
    draw: st.DrawFn, *, prefix: str, min_size: int = 0, max_size: int = 6
) -> list[Observation]:
    """Observations of a few owners, each with one to three sources (ids apart per prefix)."""
    observations: list[Observation] = []
    side = 0 if prefix == "h" else 1
    numbers = count(draw(st.integers(1, 1_000_000)))
    for owner in range(draw(st.integers(min_size, max_size))):
        owner_key = f"publisher:{prefix}-{owner}"
        for source in range(draw(st.integers(1, 3))):
            source_id = side * 1000 + owner * 10 + source
            weight = draw(weights)
            active = draw(st.booleans()) if draw(st.integers(0, 9)) == 0 else True
            for _ in range(draw(st.integers(1, 4))):
                observations.append(
                    Observation(
                        id=next(numbers) * 2 + side,
                        observed_on=DAY - timedelta(days=draw(st.integers(0, 9))),
                        rate=draw(rates),
                        source_id=source_id,
                        source=f"{prefix}-{owner}-{source}",
                        owner_key=owner_key,
                        weight=weight,
                        active=active,
                    )
                )
    return observations


def _unique_ids(observations: list[Observation]) -> list[Observation]:
    seen: set[int] = set()
    unique = []
    for observation in observations:
        if observation.id not in seen:
            seen.add(observation.id)
            unique.append(observation)
    return unique


@settings(max_examples=200, deadline=None)
@given(observations=owners(prefix="h", max_size=8), seed=st.integers(0, 2**32))
def test_the_order_of_the_observations_never_matters(
    observations: list[Observation], seed: int
) -> None:
    observations = _unique_ids(observations)
    shuffled = observations[:]
    random.Random(seed).shuffle(shuffled)
    assert fix(day=DAY, observations=shuffled) == fix(day=DAY, observations=observations)


@settings(max_examples=200, deadline=None)
@given(observations=owners(prefix="h", min_size=3, max_size=8))
def test_the_fixing_lies_within_the_kept_votes(observations: list[Observation]) -> None:
    fixing = fix(day=DAY, observations=_unique_ids(observations))
    if fixing.status != FIXED:
        assert fixing.rate is None and fixing.owner_count < 3
        return
    kept = [vote.value for vote in fixing.kept_votes]
    assert fixing.rate is not None and kept
    assert round_rate(min(kept)) <= fixing.rate <= round_rate(max(kept))
    assert fixing.rate == round_rate(fixing.rate)  # six places
    assert fixing.owner_count == len({vote.owner_key for vote in fixing.votes})
    assert len(kept) * 2 >= len(fixing.votes)  # outliers are never the majority


@settings(max_examples=200, deadline=None)
@given(
    honest=owners(prefix="h", min_size=3, max_size=6),
    attacker=owners(prefix="a", min_size=1, max_size=1),
)
def test_one_owner_whatever_it_posts_moves_the_fixing_only_as_one_vote_can(
    honest: list[Observation], attacker: list[Observation]
) -> None:
    """Any number of observations over any sources of one owner: exactly one vote, as heavy as
    its heaviest source, and the fixing equals the one with that single vote posted once."""
    honest, attacker = _unique_ids(honest), _unique_ids(attacker)
    fixing = fix(day=DAY, observations=honest + attacker)
    votes = [vote for vote in fixing.votes if vote.owner_key == "publisher:a-0"]
    assert len(votes) <= 1
    without = fix(day=DAY, observations=honest)
    if not votes:  # nothing of the attacker's was eligible
        assert (fixing.status, fixing.rate) == (without.status, without.rate)
        return
    (vote,) = votes
    assert fixing.owner_count == without.owner_count + 1
    single = Observation(
        id=-1,
        observed_on=DAY,
        rate=vote.value,
        source_id=-1,
        source="one vote",
        owner_key="publisher:a-0",
        weight=vote.weight,
        active=True,
    )
    once = fix(day=DAY, observations=[*honest, single])
    assert (once.status, once.rate) == (fixing.status, fixing.rate)
    assert vote.weight == max(quote.weight for quote in vote.sources)


@settings(max_examples=100, deadline=None)
@given(observations=owners(prefix="h", max_size=8))
def test_every_fixing_recomputes_from_its_stored_inputs(observations: list[Observation]) -> None:
    fixing = fix(day=DAY, observations=_unique_ids(observations))
    again = fixing_from_inputs(fixing.inputs_json())
    assert again == fixing
