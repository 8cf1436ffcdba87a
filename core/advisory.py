"""Transaction-level advisory locks, one namespace per purpose, all listed here.

`pg_advisory_xact_lock(namespace, key)` serializes whatever takes the same pair until the
transaction ends. Two purposes that shared a namespace would wait on each other whenever their
keys met (an organization id and a day number are both plain integers): the marketplace fixing
run and hold creation did, both on 7_202, until this list. `@unique` refuses a repeated number
when the module is imported; tests/test_locks.py checks that no app code (migrations aside)
takes an advisory lock any other way.
"""

from __future__ import annotations

from enum import IntEnum, unique

from django.db import connection


@unique
class LockNamespace(IntEnum):
    """The first key of a two-key advisory lock: what the lock is for."""

    # One index fixing run per day (inventory.services.index; key: the day's ordinal).
    INDEX_FIXING = 7_201
    # Hold creation of one organization at a time (leasing.locks; key: the organization's id).
    HOLD_QUOTA = 7_202
    # One marketplace fixing run per day (inventory.services.marketplace_index; key: the day's
    # ordinal). It was 7_202, HOLD_QUOTA's, before.
    MARKETPLACE_FIXING = 7_203
    # One archive or restore of a usage month at a time (billing.services.usage_archive; key:
    # the month's first day's ordinal).
    USAGE_ARCHIVE_MONTH = 7_204
    # One refresh of the usage rollups at a time (billing.services.rollups; key: 0). It was the
    # single-key lock 0x62696C6C5F726F6C before.
    USAGE_ROLLUPS = 7_205
    # The rebuild of one node's free spans (key: the node's id). Written into the trigger
    # functions of leasing migrations 0018, 0020 and 0027, which have landed: never change it.
    NODE_FREE_SPANS = 722_001


def advisory_xact_lock(namespace: LockNamespace, key: int) -> None:
    """Wait for, then hold until the transaction ends, the advisory lock (namespace, key)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [int(namespace), key])
