"""Evaluations of one budget racing (the ingest's task, an invoice's task and beat at once):
each threshold is crossed, and sent, exactly once."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import connection

from billing.models import BudgetCrossing
from billing.services.budgets import budget_create, budgets_evaluate
from core.models import OutboxEvent
from tests.billing.budget_factories import JUNE_15, spend
from tests.billing.factories import token_contract

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_racing_evaluations_cross_each_threshold_once(provider, customer):
    contract = token_contract(provider, customer)
    budget = budget_create(
        organization=customer,
        name="Race",
        amount=Decimal(20),
        currency="USD",
        action="alert",
        now=JUNE_15,
    )
    spend(provider, contract, count=3, at=JUNE_15)  # 24 USD: 50, 80 and 100 % at once
    racers = 4
    barrier = threading.Barrier(racers)
    crossed: list[int] = [0] * racers

    def evaluate(index: int) -> None:
        try:
            barrier.wait()
            crossed[index] = budgets_evaluate(now=JUNE_15)
        finally:
            connection.close()

    threads = [threading.Thread(target=evaluate, args=(i,)) for i in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sum(crossed) == 3
    assert sorted(
        BudgetCrossing.objects.filter(budget=budget).values_list("threshold_pct", flat=True)
    ) == [50, 80, 100]
    assert (
        OutboxEvent.objects.filter(
            organization_id=customer.pk, type="budget.threshold_crossed"
        ).count()
        == 3
    )
