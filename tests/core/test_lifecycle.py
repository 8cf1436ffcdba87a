"""core.lifecycle: the map refuses moves it does not have; advance saves and records in one go."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from core.lifecycle import Lifecycle, StatusChange, TransitionNotAllowed

pytestmark = pytest.mark.django_db

# A made-up lifecycle over a real model with a text field to stand for a status.
DOOR = Lifecycle(
    "door",
    {"shut": frozenset({"open", "locked"}), "open": frozenset({"shut"}), "locked": frozenset()},
    field="name",
    error_code="door_stuck",
)


def test_a_map_names_its_statuses_and_its_dead_ends():
    assert DOOR.statuses == {"shut", "open", "locked"}
    assert DOOR.terminal == {"locked"}
    assert DOOR.allows("shut", "open") and not DOOR.allows("open", "locked")


def test_a_map_with_a_target_it_does_not_list_is_a_programming_error():
    with pytest.raises(ValueError, match="targets without an entry"):
        Lifecycle("door", {"shut": frozenset({"ajar"})})


def test_the_guard_answers_409_with_its_code_and_the_moves_that_were_possible():
    with pytest.raises(TransitionNotAllowed) as refused:
        DOOR.guard("open", "locked", label="7")
    assert refused.value.status_code == 409
    assert refused.value.code == "door_stuck"
    assert refused.value.message == "door 7 cannot go from open to locked."
    assert refused.value.detail == {"from": "open", "to": "locked", "allowed": ["shut"]}


def test_advance_saves_the_status_and_hands_the_change_to_the_writer_in_the_transaction():
    door = Organization.objects.create(name="shut", slug="door", is_customer=True)
    written: list[tuple[Any, StatusChange]] = []
    at = timezone.now()
    with transaction.atomic():
        change = DOOR.advance(
            door,
            to="open",
            at=at,
            actor="ops",
            reason="fresh air",
            record=lambda obj, change: written.append((obj, change)),
            inputs={"window": 1},
        )
    assert change == StatusChange(
        entity="door",
        from_status="shut",
        to_status="open",
        at=at,
        actor="ops",
        reason="fresh air",
        inputs={"window": 1},
    )
    assert written == [(door, change)]
    door.refresh_from_db()
    assert door.name == "open"


def test_advance_refuses_a_move_off_the_map_without_writing():
    door = Organization.objects.create(name="shut", slug="door", is_customer=True)
    written: list[StatusChange] = []
    with transaction.atomic(), pytest.raises(TransitionNotAllowed):
        DOOR.advance(
            door,
            to="shut",
            at=timezone.now(),
            actor="a",
            reason="r",
            record=lambda obj, change: written.append(change),
        )
    door.refresh_from_db()
    assert door.name == "shut" and written == []


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_advance_refuses_to_run_outside_a_transaction():
    door = Organization.objects.create(name="shut", slug="door", is_customer=True)
    with pytest.raises(RuntimeError, match="inside a transaction"):
        DOOR.advance(
            door, to="open", at=timezone.now(), actor="a", reason="r", record=lambda *_: None
        )
    door.refresh_from_db()
    assert door.name == "shut"
