"""Lease deposits in the API: `GET /api/v1/deposits/` and `/{id}/` (docs/ledger.md, "Deposits").

The lessee and the lessor of the lease read its deposit; operators read all; another tenant's
answers 404. Deposits are made and released by the lease itself (lease hooks), never here.
"""

from __future__ import annotations

from decimal import Decimal

import django_filters
from drf_spectacular.utils import extend_schema_field
from rest_framework import mixins, serializers, viewsets

from accounts.api.mixins import OrganizationScopedMixin
from billing.models import DepositStatus, LeaseDeposit
from core.api.fields import MinorUnitMixin


class LeaseDepositSerializer(MinorUnitMixin, serializers.ModelSerializer[LeaseDeposit]):
    """A lease's deposit: how much, where it came from, and what its release gave back."""

    money_fields = ("amount", "returned_amount", "withheld_amount", "held_now")

    contract = serializers.CharField(source="contract.number", read_only=True)
    provider = serializers.IntegerField(source="contract.lessor_id", read_only=True)
    held_now = serializers.SerializerMethodField(
        help_text="What the deposit's sub-ledger holds now (amount until release, then withheld)."
    )

    class Meta:
        model = LeaseDeposit
        fields = [
            "id",
            "lease",
            "contract",
            "customer",
            "provider",
            "currency",
            "amount",
            "status",
            "held_at",
            "held_now",
            "draws",
            "released_at",
            "returned_amount",
            "withheld_amount",
            "release_inputs",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.DecimalField(max_digits=19, decimal_places=4))
    def get_held_now(self, deposit: LeaseDeposit) -> Decimal:
        return deposit.amount - deposit.returned_amount


class LeaseDepositFilter(django_filters.FilterSet):
    """Filter deposits by lease, status and currency."""

    lease = django_filters.NumberFilter(field_name="lease_id")
    status = django_filters.MultipleChoiceFilter(choices=DepositStatus.choices)
    currency = django_filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = LeaseDeposit
        fields = ["lease", "status", "currency"]


class LeaseDepositViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[LeaseDeposit],
):
    """Deposits of the caller's leases (as lessee or lessor; operators: all)."""

    queryset = LeaseDeposit.objects.select_related("contract")
    serializer_class = LeaseDepositSerializer
    lookup_value_regex = r"\d+"
    tenant_fields = ("customer", "contract__lessor")
    filterset_class = LeaseDepositFilter
    ordering_fields = ["id", "held_at", "amount"]
    ordering = ["-id"]
