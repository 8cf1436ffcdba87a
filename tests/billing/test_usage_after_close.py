"""Usage that arrives after a contract's final invoice is issued is refused, never lost silently."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine

from billing.models import Invoice, UsageEvent
from billing.services.cycle import billing_cycle_run
from contracts.services import contracts_end_due
from tests.billing.factories import event, token_contract

pytestmark = pytest.mark.django_db

START = datetime(2027, 1, 1, tzinfo=UTC)
END = datetime(2027, 3, 1, tzinfo=UTC)


def post(client: Any, batch: list[dict[str, Any]]) -> dict[str, Any]:
    answer = client.post("/api/v1/usage/events/", {"events": batch}, format="json")
    assert answer.status_code in (200, 201), answer.content
    return answer.json()


def test_late_usage_of_an_ended_contract_joins_the_final_invoice_until_it_is_issued(
    provider: Any, customer: Any, client_for: Any
) -> None:
    contract = token_contract(provider, customer, term_start=START, term_end=END)
    client = client_for(provider)
    with time_machine.travel(datetime(2027, 2, 10, tzinfo=UTC), tick=False):
        post(client, [event("feb-1", contract, datetime(2027, 2, 9, tzinfo=UTC))])
    with time_machine.travel(datetime(2027, 3, 1, 0, 30, tzinfo=UTC), tick=False):
        contracts_end_due()
        # Inside the grace hour: a January event is late (January closed) but the final
        # invoice is still a draft, so it joins it as a late adjustment.
        answer = post(client, [event("jan-late", contract, datetime(2027, 1, 20, tzinfo=UTC))])
        assert answer["accepted"] == 1 and answer["late"] == 1
    # January's invoice was never made in this test: the cycle makes both now.
    billing_cycle_run(now=datetime(2027, 3, 1, 2, tzinfo=UTC), deliver=False)
    final = Invoice.objects.get(contract=contract, period_start=datetime(2027, 2, 1, tzinfo=UTC))
    assert [line.kind for line in final.lines.all()] == [
        "input_tokens",
        "output_tokens",
        "late_input_tokens",
        "late_output_tokens",
    ]
    with time_machine.travel(datetime(2027, 3, 2, tzinfo=UTC), tick=False):
        answer = post(client, [event("jan-later", contract, datetime(2027, 1, 21, tzinfo=UTC))])
    [result] = answer["results"]
    assert result["status"] == "rejected"
    assert result["reason"]["code"] == "contract_closed"
    assert not UsageEvent.objects.filter(event_id="jan-later").exists()
