"""The nightly job recomputes only months whose inputs changed, and its rows are, to the cent,
what recomputing every month of every node from scratch gives (the computation before the job
became incremental, kept here as the oracle).

The data goes through the real doors: leases through `lease_create`, invoices through the
billing cycle, a credit note through its service, monthly rent on a whole-server lease, outages,
FX rates; the job runs through its Celery task.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.db import connection

from billing.models import Invoice
from billing.services.documents import credit_note_issue
from economics.fx import FxTable
from economics.models import AssetMonth, AssetPayback, DirtyMonth, EconomicsRun, FxRate
from economics.selectors.gpu_hours import gpu_seconds
from economics.selectors.revenue import revenue_attribute
from economics.services.assets import asset_economics_refresh, node_months
from economics.tasks import refresh
from inventory.models import Node
from inventory.services.nodes import node_update
from inventory.services.sites import site_update
from leasing.services.leases import lease_create, request_build
from tests.contracts.factories import ACCEPTANCE_TOKENS, SLA_LADDER
from tests.economics.factories import at, bill_until, lease_node, offer_on
from tests.economics.factories import worked_example_node as server
from tests.leasing.factories import make_offer, outage
from tests.scenarios import acceptance_passed

pytestmark = pytest.mark.django_db

IGNORED = {"id", "computed_at", "inputs_fingerprint"}
MONTH_FIELDS = [f.attname for f in AssetMonth._meta.concrete_fields if f.name not in IGNORED]
PAYBACK_FIELDS = [f.attname for f in AssetPayback._meta.concrete_fields if f.name not in IGNORED]


def from_scratch(now: datetime) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every month and payback of every node as the job computed them before it became
    incremental: all months from acquisition, no fingerprints, nothing read back."""
    nodes = list(Node.objects.select_related("site").order_by("pk"))
    seconds = gpu_seconds(node_ids=[node.pk for node in nodes], now=now, step="1 month")
    buckets: dict[int, dict[date, Any]] = defaultdict(dict)
    for (node_id, bucket), value in seconds.items():
        buckets[node_id][bucket.astimezone(UTC).date()] = value
    revenue: dict[int, dict[date, Any]] = defaultdict(dict)
    for (node_id, month), pieces in revenue_attribute().pieces.items():
        revenue[node_id][month] = pieces
    fx = FxTable.load()
    results = [node_months(node, buckets[node.pk], revenue[node.pk], fx, now) for node in nodes]
    months = [
        tuple(getattr(row, name) for name in MONTH_FIELDS)
        for result in results
        for row in result.months
    ]
    paybacks = [tuple(getattr(r.payback, name) for name in PAYBACK_FIELDS) for r in results]
    return months, paybacks


def stored() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    months = AssetMonth.objects.order_by("node_id", "month").values_list(*MONTH_FIELDS)
    paybacks = AssetPayback.objects.order_by("node_id").values_list(*PAYBACK_FIELDS)
    return list(months), list(paybacks)


def nightly(now: datetime) -> EconomicsRun:
    """The nightly task, run through Celery in this process."""
    run_id = refresh.apply(kwargs={"as_of": now.isoformat()}).get()
    return EconomicsRun.objects.get(pk=run_id)


def stamps() -> dict[tuple[int, date], str]:
    """Each month row's row version (xmin): it changes when, and only when, the row is written."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT node_id, month, xmin::text FROM billing_assetmonth")
        return {(node_id, month): version for node_id, month, version in cursor.fetchall()}


def marked() -> set[tuple[int, date]]:
    """The dirty set as the triggers left it: (node, first changed month)."""
    return set(DirtyMonth.objects.values_list("node_id", "month"))


def changed_since(before: dict[tuple[int, date], str]) -> list[tuple[int, date]]:
    after = stamps()
    return sorted(key for key in after if after[key] != before.get(key))


def rent_lease(provider: Any, customer: Any, node: Node) -> None:
    """The whole server on monthly rent (30,000 USD) from 2027-01-10 to 2027-05-01."""
    with time_machine.travel(at(1, 2), tick=False):
        offer = make_offer(
            provider,
            nodes=[node],
            name_nodes=True,
            price_unit="node_month",
            price_per_node_month=Decimal("30000"),
            interruptible_price_per_gpu_hour=None,
            contract_template=[ACCEPTANCE_TOKENS, SLA_LADDER],
        )
        lease = lease_create(
            customer=customer,
            request=request_build(offer=offer, gpu_count=8, start=at(1, 10), end=at(5, 1)),
            actor="customer",
        )
    acceptance_passed(lease, at(1, 10))


@pytest.fixture
def fleet(provider: Any, customer: Any) -> dict[str, Node]:
    """Four servers: leased whole (USD), half-leased (EUR books), on monthly rent, idle."""
    whole = server(provider)
    lease_node(offer_on(whole), customer, start=at(1, 10), end=at(7, 1))
    outage(whole, at(2, 10), at(2, 12, 12))  # whole node: an SLA credit in February
    half = server(provider, currency="EUR")
    lease_node(offer_on(half, price="2.95"), customer, start=at(2, 5), end=at(4, 20), gpus=4)
    outage(half, at(3, 3), at(3, 4, 7), gpu=half.gpus.order_by("pk").first())
    rented = server(provider)
    rent_lease(provider, customer, rented)
    idle = server(provider, acquired_on=date(2027, 1, 15))
    outage(idle, at(1, 15), at(1, 20))
    for valid_on, rate in ((date(2027, 1, 1), "0.9"), (date(2027, 3, 1), "0.915")):
        FxRate.objects.create(
            base_currency="USD",
            quote_currency="EUR",
            rate=Decimal(rate),
            valid_on=valid_on,
            source="ECB reference rate",
        )
    for month in (2, 3, 4):
        bill_until(at(month, 1, 2))
    invoice = Invoice.objects.filter(contract__lease__offer__nodes=whole).order_by("pk").first()
    assert invoice is not None
    credit_note_issue(invoice=invoice, reason="goodwill", actor="operator", amount=Decimal("99.99"))
    return {"whole": whole, "half": half, "rented": rented, "idle": idle}


def test_the_nightly_job_writes_what_a_recompute_from_scratch_gives_to_the_cent(
    fleet: dict[str, Node],
) -> None:
    run = nightly(at(4, 1, 3))

    months, paybacks = stored()
    assert (months, paybacks) == from_scratch(at(4, 1, 3))
    assert run.months == len(months) == 4 + 4 + 4 + 4  # January to three hours of April
    half_march = AssetMonth.objects.get(node=fleet["half"], month=date(2027, 3, 1))
    assert half_march.currency == "EUR" and half_march.revenue > 0
    assert {c["rate"] for c in half_march.revenue_detail["conversions"]} == {"0.9150000000"}
    rented_feb = AssetMonth.objects.get(node=fleet["rented"], month=date(2027, 2, 1))
    assert rented_feb.revenue == Decimal("30000.00")


def test_an_unchanged_rerun_writes_nothing_and_a_full_recompute_agrees(
    fleet: dict[str, Node],
) -> None:
    nightly(at(4, 1, 3))
    before = stamps()

    assert nightly(at(4, 1, 3)).months == 0
    assert stamps() == before
    nodes, written, _ = asset_economics_refresh(now=at(4, 1, 3), full=True)
    assert (nodes, written) == (4, 0)
    assert stamps() == before


def test_a_change_to_one_past_month_recomputes_just_that_month(fleet: dict[str, Node]) -> None:
    nightly(at(4, 1, 3))
    before = stamps()
    # A late-recorded GPU outage in February: available and allocated hours of that month
    # change; the server draws the same power idle or busy, and February is billed already.
    whole = fleet["whole"]
    outage(whole, at(2, 20), at(2, 21), gpu=whole.gpus.order_by("pk").last())
    assert marked() == {(whole.pk, date(2027, 2, 1))}

    run = nightly(at(4, 1, 3))

    after = stamps()
    assert run.months == 1
    assert [key for key in after if after[key] != before[key]] == [(whole.pk, date(2027, 2, 1))]
    assert stored() == from_scratch(at(4, 1, 3))


def test_the_next_night_rewrites_only_each_nodes_running_month(fleet: dict[str, Node]) -> None:
    nightly(at(4, 1, 3))
    before = stamps()

    run = nightly(at(4, 2, 3))

    after = stamps()
    changed = sorted(key for key in after if after[key] != before[key])
    assert run.months == 4
    assert changed == sorted((node.pk, date(2027, 4, 1)) for node in fleet.values())
    assert stored() == from_scratch(at(4, 2, 3))


def test_a_corrected_fx_rate_recomputes_the_months_that_convert_with_it(
    fleet: dict[str, Node],
) -> None:
    nightly(at(4, 1, 3))
    before = stamps()
    rate = FxRate.objects.get(valid_on=date(2027, 3, 1))
    rate.rate = Decimal("0.925")
    rate.save(update_fields=["rate"])

    run = nightly(at(4, 1, 3))

    after = stamps()
    changed = sorted(key for key in after if after[key] != before[key])
    # The EUR server's March and April convert with the corrected rate; nothing else moved.
    assert changed == [(fleet["half"].pk, date(2027, 3, 1)), (fleet["half"].pk, date(2027, 4, 1))]
    assert run.months == 2
    assert stored() == from_scratch(at(4, 1, 3))


def test_a_node_retired_early_loses_its_later_months(fleet: dict[str, Node]) -> None:
    nightly(at(4, 1, 3))
    idle = fleet["idle"]
    # Retirement is read from the node's history (the first row with status retired).
    with time_machine.travel(datetime(2027, 2, 20, tzinfo=UTC), tick=False):
        node_update(node=idle, changes={"status": "retired"})

    assert marked() == {(idle.pk, date(2027, 2, 1))}

    nightly(at(4, 1, 3))

    assert list(
        AssetMonth.objects.filter(node=idle).order_by("month").values_list("month", flat=True)
    ) == [date(2027, 1, 1), date(2027, 2, 1)]
    assert stored() == from_scratch(at(4, 1, 3))


def test_a_run_takes_the_marks_it_recomputed(fleet: dict[str, Node]) -> None:
    assert marked()  # the fleet's leases and outages were recorded after no run at all

    nightly(at(4, 1, 3))

    assert marked() == set()


def test_a_new_lease_marks_its_node_from_its_first_month_and_only_that_month_moves(
    fleet: dict[str, Node], customer: Any
) -> None:
    nightly(at(4, 1, 3))
    before = stamps()
    idle = fleet["idle"]

    lease_node(offer_on(idle), customer, start=at(3, 5), end=at(3, 25))

    assert marked() == {(idle.pk, date(2027, 3, 1))}
    run = nightly(at(4, 1, 3))
    # Its power draw is the same idle or busy and March is not billed yet: only the hours move.
    assert changed_since(before) == [(idle.pk, date(2027, 3, 1))]
    assert run.months == 1
    assert stored() == from_scratch(at(4, 1, 3))


def test_a_node_cost_change_marks_the_node_from_its_acquisition(fleet: dict[str, Node]) -> None:
    nightly(at(4, 1, 3))
    before = stamps()
    half = fleet["half"]

    node_update(node=half, changes={"capex": Decimal("320000.00")})

    assert marked() == {(half.pk, date(2027, 1, 1))}
    nightly(at(4, 1, 3))
    assert changed_since(before) == [(half.pk, date(2027, month, 1)) for month in (1, 2, 3, 4)]
    assert stored() == from_scratch(at(4, 1, 3))


def test_a_site_power_price_change_marks_the_sites_nodes(fleet: dict[str, Node]) -> None:
    nightly(at(4, 1, 3))
    whole = fleet["whole"]

    site_update(site=whole.site, changes={"power_price_per_kwh": Decimal("0.09")})

    assert marked() == {(whole.pk, date(2027, 1, 1))}
    nightly(at(4, 1, 3))
    assert stored() == from_scratch(at(4, 1, 3))


def test_changes_the_job_does_not_read_mark_nothing(fleet: dict[str, Node]) -> None:
    nightly(at(4, 1, 3))
    whole = fleet["whole"]

    node_update(node=whole, changes={"hostname": "renamed-for-the-audit"})
    site_update(site=whole.site, changes={"city": "Elsewhere"})
    whole.outages.update(note="cable cut, confirmed by the site")

    assert marked() == set()


def test_a_credit_note_after_the_run_recomputes_its_nodes_months(fleet: dict[str, Node]) -> None:
    nightly(at(4, 1, 3))
    before = stamps()
    half = fleet["half"]
    invoice = Invoice.objects.filter(contract__lease__offer__nodes=half).order_by("pk").first()
    assert invoice is not None

    credit_note_issue(invoice=invoice, reason="goodwill", actor="operator", amount=Decimal("50"))

    assert marked() == set()  # revenue is digested per month, not marked
    nightly(at(4, 1, 3))
    changed = changed_since(before)
    assert changed and {node for node, _ in changed} == {half.pk}
    assert stored() == from_scratch(at(4, 1, 3))


def test_a_payback_reached_in_an_earlier_month_stands_when_only_the_running_month_is_recomputed(
    fleet: dict[str, Node],
) -> None:
    rented = fleet["rented"]
    node_update(node=rented, changes={"capex": Decimal("40000.00")})
    nightly(at(4, 1, 3))
    before = stamps()

    nightly(at(4, 2, 3))

    paid_back = AssetPayback.objects.get(node=rented).paid_back_in_month
    assert paid_back is not None and paid_back < 4  # read back from the stored months
    assert changed_since(before) == sorted((node.pk, date(2027, 4, 1)) for node in fleet.values())
    assert stored() == from_scratch(at(4, 2, 3))
