"""Reads of customer funds: balances per grant, and the burn-down — the date a customer's prepaid
balance runs out at its current run rate.

The run rate is what the customer's running commitments cost a day now: each active lease's
GPUs at its price for 24 hours, plus its token contracts' average spend a day over the last
seven days of hourly rollups. What is already owed but not yet issued (draft invoices) comes off
the balance first, since issuing those drafts will draw it down. A balance with no run rate
never runs out (`days_left` is None). Grants limited to card-hours or tokens count in full: the
projection is of the whole balance, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import CharField, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Cast, Concat

from billing.models import AccountKind, CreditGrant, Invoice, InvoiceStatus, LedgerAccount
from billing.models.usage import UsageRollup
from contracts.choices import LIVE_STATUSES, PricingBasis
from contracts.models import Contract
from core.money import round_money
from leasing.choices import LeaseStatus
from leasing.models import Lease

HOURS_A_DAY = Decimal(24)
TOKEN_WINDOW_DAYS = 7
MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class BurnDown:
    """One customer's prepaid balance in one currency, and when it runs out at today's rate."""

    customer_id: int
    currency: str
    balance: Decimal
    unbilled: Decimal
    daily_burn: Decimal
    days_left: Decimal | None
    runs_out_at: datetime | None
    as_of: datetime
    explanation: str


def grants_with_balances(grants: QuerySet[CreditGrant] | None = None) -> QuerySet[CreditGrant]:
    """Grants (all by default) with their sub-ledger's balance (`subledger_balance`, None
    before the sub-ledger is opened), in one query."""
    balance = LedgerAccount.objects.filter(
        organization_id=OuterRef("customer_id"),
        currency=OuterRef("currency"),
        kind=AccountKind.CUSTOMER_BALANCE,
        # grant_subledger(pk), in SQL
        subledger=Concat(Value("grant:"), Cast(OuterRef("pk"), CharField())),
    ).values("balance")[:1]
    base = CreditGrant.objects.all() if grants is None else grants
    return base.annotate(subledger_balance=Subquery(balance))


def prepaid_balances(customer_ids: list[int] | None = None) -> dict[tuple[int, str], Decimal]:
    """(customer, currency) → what its live grants hold (positive)."""
    accounts = LedgerAccount.objects.filter(kind=AccountKind.CUSTOMER_BALANCE)
    if customer_ids is not None:
        accounts = accounts.filter(organization_id__in=customer_ids)
    rows = accounts.values("organization_id", "currency").annotate(total=Sum("balance"))
    return {(row["organization_id"], row["currency"]): -row["total"] for row in rows}


def _lease_burns(customer_ids: list[int], now: datetime) -> dict[tuple[int, str], Decimal]:
    """(customer, currency) → its active leases at their price, for a day."""
    leases = Lease.objects.filter(
        customer_id__in=customer_ids,
        status=LeaseStatus.ACTIVE,
        start__lte=now,
        end__gt=now,
    ).values_list("customer_id", "currency", "gpu_count", "price_per_gpu_hour")
    burns: dict[tuple[int, str], Decimal] = {}
    for customer_id, currency, count, rate in leases:
        key = (customer_id, currency)
        burns[key] = burns.get(key, Decimal(0)) + count * rate * HOURS_A_DAY
    return burns


def _token_burns(customer_ids: list[int], now: datetime) -> dict[tuple[int, str], Decimal]:
    """(customer, currency) → its token contracts' average spend a day over the last seven
    days."""
    contracts = Contract.objects.filter(
        lessee_id__in=customer_ids,
        pricing_basis=PricingBasis.TOKEN_SLA,
        status__in=LIVE_STATUSES,
    )
    since = now - timedelta(days=TOKEN_WINDOW_DAYS)
    usage = {
        row["contract_id"]: row
        for row in UsageRollup.objects.filter(contract__in=contracts, hour__gte=since, hour__lt=now)
        .order_by()
        .values("contract_id")
        .annotate(inputs=Sum("input_tokens_success"), outputs=Sum("output_tokens_success"))
    }
    burns: dict[tuple[int, str], Decimal] = {}
    for contract in contracts:
        used = usage.get(contract.pk, {"inputs": None, "outputs": None})
        spend = Decimal(used["inputs"] or 0) / MILLION * (
            contract.rate_per_million_input_tokens or 0
        ) + Decimal(used["outputs"] or 0) / MILLION * (contract.rate_per_million_output_tokens or 0)
        key = (contract.lessee_id, contract.currency)
        burns[key] = burns.get(key, Decimal(0)) + spend / TOKEN_WINDOW_DAYS
    return burns


def _unbilled(customer_ids: list[int]) -> dict[tuple[int, str], Decimal]:
    """(customer, currency) → its drafts of ended periods: they will draw the balance down when
    they are issued."""
    rows = (
        Invoice.objects.filter(customer_id__in=customer_ids, status=InvoiceStatus.DRAFT)
        .order_by()
        .values("customer_id", "currency")
        .annotate(total=Sum("total"))
    )
    return {
        (row["customer_id"], row["currency"]): max(row["total"] or Decimal(0), Decimal(0))
        for row in rows
    }


def burn_downs(customer_ids: list[int], *, now: datetime) -> dict[int, list[BurnDown]]:
    """Each customer's burn-down in every currency it holds grants in, ordered by currency; a
    fixed number of queries however many customers."""
    pairs = sorted(
        set(
            CreditGrant.objects.filter(customer_id__in=customer_ids).values_list(
                "customer_id", "currency"
            )
        )
    )
    balances = prepaid_balances(customer_ids)
    unbilled = _unbilled(customer_ids)
    leases = _lease_burns(customer_ids, now)
    tokens = _token_burns(customer_ids, now)
    result: dict[int, list[BurnDown]] = {customer_id: [] for customer_id in customer_ids}
    for key in pairs:
        result[key[0]].append(
            _projection(
                key,
                balance=balances.get(key, Decimal(0)),
                unbilled=unbilled.get(key, Decimal(0)),
                daily=round_money(
                    leases.get(key, Decimal(0)) + tokens.get(key, Decimal(0)), key[1]
                ),
                now=now,
            )
        )
    return result


def burn_down(*, customer_id: int, currency: str, now: datetime) -> BurnDown:
    """The burn-down of one customer's balance in one currency."""
    key = (customer_id, currency)
    ids = [customer_id]
    return _projection(
        key,
        balance=prepaid_balances(ids).get(key, Decimal(0)),
        unbilled=_unbilled(ids).get(key, Decimal(0)),
        daily=round_money(
            _lease_burns(ids, now).get(key, Decimal(0))
            + _token_burns(ids, now).get(key, Decimal(0)),
            currency,
        ),
        now=now,
    )


def _projection(
    key: tuple[int, str], *, balance: Decimal, unbilled: Decimal, daily: Decimal, now: datetime
) -> BurnDown:
    """When `balance` less `unbilled` runs out at `daily` a day."""
    customer_id, currency = key
    available = max(balance - unbilled, Decimal(0))
    if daily <= 0:
        days_left = None
        runs_out_at = None
        sentence = (
            f"{balance} {currency} on the prepaid balance and nothing running that spends it: "
            "it does not run out at the current rate."
        )
    else:
        days_left = (available / daily).quantize(Decimal("0.01"))
        runs_out_at = now + timedelta(days=float(available / daily))
        sentence = (
            f"{balance} {currency} on the prepaid balance, {unbilled} of it owed on invoices "
            f"not yet issued; at {daily} {currency} a day (running leases and the last "
            f"{TOKEN_WINDOW_DAYS} days of tokens) it runs out in {days_left} days, "
            f"on {runs_out_at:%Y-%m-%d %H:%M} UTC."
        )
    return BurnDown(
        customer_id=customer_id,
        currency=currency,
        balance=balance,
        unbilled=unbilled,
        daily_burn=daily,
        days_left=days_left,
        runs_out_at=runs_out_at,
        as_of=now,
        explanation=sentence,
    )
