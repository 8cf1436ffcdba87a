"""core.deferred: a batch's deferred rows reach the table at the flush, and a batch that ends
without flushing them fails loudly instead of dropping them."""

from __future__ import annotations

import pytest
from django.db import transaction

from core.deferred import UnflushedWrites, batch_writes, insert, insert_many, writes_flush
from core.models import IdempotencyRecord

pytestmark = pytest.mark.django_db


def _record(key: str) -> IdempotencyRecord:
    return IdempotencyRecord(scope="org:1", key=key, method="POST", path="/x", fingerprint="f")


def test_rows_wait_for_the_flush_and_are_inserted_by_it():
    with transaction.atomic(), batch_writes():
        insert(_record("one"))
        insert_many(IdempotencyRecord, [_record("two"), _record("three")])
        assert not IdempotencyRecord.objects.exists()
        writes_flush()
        assert set(IdempotencyRecord.objects.values_list("key", flat=True)) == {
            "one",
            "two",
            "three",
        }


def test_a_batch_that_ends_without_flushing_raises_and_its_transaction_keeps_nothing():
    unflushed = pytest.raises(UnflushedWrites, match=r"2 core\.IdempotencyRecord")
    with unflushed, transaction.atomic(), batch_writes():
        insert(_record("flushed"))
        writes_flush()
        insert_many(IdempotencyRecord, [_record("lost-1"), _record("lost-2")])
    assert not IdempotencyRecord.objects.exists()


def test_an_exception_in_the_batch_is_what_propagates():
    with pytest.raises(ValueError, match="boom"), transaction.atomic(), batch_writes():
        insert(_record("dropped"))
        raise ValueError("boom")
    assert not IdempotencyRecord.objects.exists()


def test_outside_a_batch_rows_are_inserted_at_once():
    insert(_record("now"))
    assert IdempotencyRecord.objects.get().key == "now"
