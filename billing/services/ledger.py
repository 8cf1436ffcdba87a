"""Posting to the ledger: accounts found or opened, balanced transactions written once.

`ledger_post` is the one writer of transactions and entries (docs/ledger.md). It runs inside the
caller's transaction, the one that changes the document, so a document and its posting commit
together or not at all. A known `dedupe_key` returns the transaction already posted (L4): a rerun,
a replayed webhook or a second backfill posts nothing twice. The database checks the balance
again at commit (L1), and keeps each account's balance (L5) on insert.

Lock order: the accounts' rows are updated by the balance trigger as entries are inserted, after
every document lock of the caller; entries are inserted in account pk order so two postings that
touch the same accounts take their row locks in the same order.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Q

from accounts.models import Organization
from billing.models import (
    MARKETPLACE_KINDS,
    NON_NEGATIVE_KINDS,
    CreditGrant,
    CreditNote,
    Invoice,
    LedgerAccount,
    LedgerEntry,
    LedgerTransaction,
    Payout,
    Refund,
)
from contracts.services import json_value
from core.deferred import batching, insert, insert_many
from core.errors import SemanticError
from core.memo import memoized, remember

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Leg:
    """One entry to post: a signed amount (debit positive) on an account."""

    account: LedgerAccount
    amount: Decimal
    memo: str = ""
    invoice_line_id: int | None = None


def ledger_account(
    *, organization: Organization | int | None, currency: str, kind: str, subledger: str = ""
) -> LedgerAccount:
    """The account of an owner, currency and kind, opened on first use (None: the marketplace)."""
    organization_id = organization.pk if isinstance(organization, Organization) else organization
    if (kind in MARKETPLACE_KINDS) != (organization_id is None):
        raise SemanticError(
            f"A {kind} account belongs to "
            f"{'the marketplace' if kind in MARKETPLACE_KINDS else 'an organization'}.",
            code="ledger_account_owner",
        )
    # None (the marketplace) is a value of the lookup, not "any".
    owner: dict[str, Any] = {"organization_id": organization_id}

    def opened() -> LedgerAccount:
        account, _ = LedgerAccount.objects.get_or_create(
            **owner,
            currency=currency,
            kind=kind,
            subledger=subledger,
            defaults={"may_go_negative": kind not in NON_NEGATIVE_KINDS},
        )
        return account

    # An account, once open, stays: a batch of the billing cycle looks each one up once.
    return memoized(("ledger_account", organization_id, currency, kind, subledger), opened)


def ledger_accounts_remember(
    *, organization_ids: Iterable[int], opening: Iterable[tuple[int, str, str]] = ()
) -> None:
    """In a batch memo: read the open accounts of these organizations and of the marketplace in
    one query, so that `ledger_account` finds each without a query of its own.

    `opening`: (organization, currency, kind) accounts the batch will post to, opened first in
    one INSERT where missing (in key order, so two batches opening the same accounts wait on
    each other instead of deadlocking).
    """
    missing = [
        LedgerAccount(
            organization_id=organization_id,
            currency=currency,
            kind=kind,
            may_go_negative=kind not in NON_NEGATIVE_KINDS,
        )
        for organization_id, currency, kind in sorted(set(opening))
        if kind not in MARKETPLACE_KINDS
    ]
    if missing:
        LedgerAccount.objects.bulk_create(missing, ignore_conflicts=True)
    accounts = LedgerAccount.objects.filter(
        Q(organization_id__in=sorted(set(organization_ids))) | Q(organization__isnull=True)
    )
    for account in accounts:
        key = (
            "ledger_account",
            account.organization_id,
            account.currency,
            account.kind,
            account.subledger,
        )
        remember(key, account)


def _unbalanced(legs: Iterable[Leg]) -> dict[str, Decimal]:
    """Per currency, what the legs sum to where that is not zero."""
    sums: dict[str, Decimal] = defaultdict(Decimal)
    for leg in legs:
        sums[leg.account.currency] += leg.amount
    return {currency: total for currency, total in sums.items() if total != 0}


def _entry_order(entry: LedgerEntry) -> tuple[int, Decimal]:
    return (entry.account_id, entry.amount)


def ledger_post(
    *,
    kind: str,
    dedupe_key: str,
    effective_at: datetime,
    explanation: str,
    actor: str,
    legs: Iterable[Leg],
    inputs: Mapping[str, Any] | None = None,
    invoice: Invoice | None = None,
    credit_note: CreditNote | None = None,
    refund: Refund | None = None,
    payout: Payout | None = None,
    credit_grant: CreditGrant | None = None,
    reverses: LedgerTransaction | None = None,
    new: bool = False,
) -> tuple[LedgerTransaction, bool]:
    """Post one balanced transaction once; (the transaction, whether it was posted now).

    Zero legs are left out (an entry is never 0); a document whose amounts are all zero is still
    posted, as a transaction without entries, so it is seen to be posted. Runs in the caller's
    transaction. `new`: the caller knows the key cannot be posted yet (the document is issued in
    this transaction); the lookup is skipped and the unique key stays the last word.
    """
    if not new:
        existing = LedgerTransaction.objects.filter(dedupe_key=dedupe_key).first()
        if existing is not None:
            return existing, False
    kept = [leg for leg in legs if leg.amount != 0]
    unbalanced = _unbalanced(kept)
    if unbalanced:
        raise SemanticError(
            f"The posting {dedupe_key} does not balance.",
            code="ledger_unbalanced",
            detail={"sums": {currency: str(total) for currency, total in unbalanced.items()}},
        )
    posted = LedgerTransaction(
        kind=kind,
        dedupe_key=dedupe_key,
        effective_at=effective_at,
        explanation=explanation,
        actor=actor,
        inputs={key: json_value(value) for key, value in (inputs or {}).items()},
        invoice=invoice,
        credit_note=credit_note,
        refund=refund,
        payout=payout,
        credit_grant=credit_grant,
        reverses=reverses,
    )
    insert(posted)
    # Account pk order (credits first within an account): the balance trigger locks each
    # account row as its entry goes in, always in the same order.
    kept.sort(key=lambda leg: (leg.account.pk, leg.amount))
    # A batch of the billing cycle inserts all its entries at once, in that order too.
    insert_many(
        LedgerEntry,
        (
            LedgerEntry(
                transaction=posted,
                account=leg.account,
                currency=leg.account.currency,
                amount=leg.amount,
                memo=leg.memo[:200],
                invoice_line_id=leg.invoice_line_id,
            )
            for leg in kept
        ),
        order=_entry_order,
    )
    logger.log(
        logging.DEBUG if batching() else logging.INFO,
        "ledger: posted %s (%s entries)",
        dedupe_key,
        len(kept),
    )
    return posted, True


def ledger_reverse(
    *,
    original: LedgerTransaction,
    kind: str,
    dedupe_key: str,
    effective_at: datetime,
    explanation: str,
    actor: str,
    invoice: Invoice | None = None,
    credit_note: CreditNote | None = None,
    payout: Payout | None = None,
) -> tuple[LedgerTransaction, bool]:
    """Post the reversal of a transaction: every entry negated, pointing back at it (once)."""
    legs = [
        Leg(
            account=entry.account,
            amount=-entry.amount,
            memo=f"reversal: {entry.memo}",
            invoice_line_id=entry.invoice_line_id,
        )
        for entry in original.entries.select_related("account").order_by("pk")
    ]
    return ledger_post(
        kind=kind,
        dedupe_key=dedupe_key,
        effective_at=effective_at,
        explanation=explanation,
        actor=actor,
        legs=legs,
        inputs={"reverses": original.dedupe_key},
        invoice=invoice,
        credit_note=credit_note,
        payout=payout,
        reverses=original,
    )
