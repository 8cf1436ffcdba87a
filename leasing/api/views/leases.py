"""Views of holds, leases and acceptance runs: customers reserve and lease; providers see theirs."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.errors import Forbidden
from accounts.models import Organization
from accounts.permissions import HasOrganizationScope, IsOperator, request_caller
from accounts.selectors import Caller, scope_queryset
from contracts.api.serializers import (
    AcceptanceOutcomeSerializer,
    AcceptanceRunInputSerializer,
    acceptance_outcome_data,
)
from contracts.models import AcceptanceRun, Contract
from contracts.selectors import acceptance_runs_with_relations, acceptance_submitter_of
from core.api.idempotency import idempotent
from core.api.serializers import read_input
from core.errors import NotFound, ValidationFailed
from inventory.models import Gpu
from leasing.api.filters import AcceptanceRunFilter, LeaseEventFilter, PreemptionNoticeFilter
from leasing.api.serializers.leases import (
    AcceptanceDecisionInputSerializer,
    AcceptanceDisputeInputSerializer,
    AcceptanceRunSerializer,
    ExtendInputSerializer,
    HoldInputSerializer,
    HoldSerializer,
    LeaseEventSerializer,
    LeaseExitInputSerializer,
    LeaseInputSerializer,
    LeaseSerializer,
    PreemptionNoticeSerializer,
    ReplaceGpuInputSerializer,
)
from leasing.choices import PriceBasis, PricingMode, Workload
from leasing.models import Allocation, Hold, Lease, LeaseEvent, Offer, PreemptionNotice, Quote
from leasing.selectors.answers import lease_answer
from leasing.selectors.visibility import offer_visible
from leasing.services.acceptance import (
    lease_acceptance_claim_confirm,
    lease_acceptance_claim_dispute,
    lease_acceptance_dispute_decide,
    lease_acceptance_run_record,
)
from leasing.services.changes import (
    lease_exit,
    lease_extend,
    lease_reject,
    lease_replace_gpu,
)
from leasing.services.holds import hold_create, hold_release
from leasing.services.leases import LeaseRequest, lease_create, request_build, request_from_quote

ALLOCATIONS = Prefetch(
    "allocations",
    queryset=Allocation.objects.select_related("gpu__node", "node__gpu_model").order_by(
        "gpu__node_id", "gpu__index"
    ),
)
# The answer to a new hold reads back only what HoldSerializer shows: the allocations' own
# columns, and from the joined rows the few it names (a GPU's index, a node's hostname, a model's
# slug). Selecting every column of the joined tables cost more CPU than the rest of the request's
# reads together (docs/architecture.md, "Request path costs"). Only for answers: objects handed to
# services keep every column.
ANSWER_ALLOCATIONS = Prefetch(
    "allocations",
    queryset=Allocation.objects.select_related("gpu__node", "node__gpu_model")
    .only(
        *(field.name for field in Allocation._meta.concrete_fields),
        "gpu__index",
        "gpu__node__hostname",
        "node__gpu_model__slug",
    )
    .order_by("gpu__node_id", "gpu__index"),
)
# The answer to a new lease: read by leasing.selectors.answers in two fixed statements and shown
# by one serializer built once per process (building LeaseSerializer's fields, not showing them,
# was most of its cost; it keeps no state between calls).
LEASE_ANSWER = LeaseSerializer()
LEASE_ANSWER.fields  # noqa: B018  (built now, not by the first requests racing each other)


def _actor(request: Request) -> str:
    return str(request.user)


def _require_customer(request: Request) -> Any:
    caller = request_caller(request)
    if caller.organization is None or not caller.organization.is_customer:
        raise Forbidden("Only customer organizations reserve and lease.", code="customer_only")
    return caller.organization


def _visible_offer(offer_id: int | None, caller: Caller) -> Offer:
    # Only offers the caller may read: another provider's paused offer is 404, not offer_paused.
    offer = offer_visible(offer_id, caller=caller) if offer_id else None
    if offer is None:
        raise NotFound("No such offer.", code="offer_not_found")
    return offer


def _own_quote(quote_id: int, organization: Any) -> Quote:
    quote = (
        Quote.objects.select_related("offer__gpu_model")
        .filter(pk=quote_id, customer=organization)
        .first()
    )
    if quote is None:
        raise NotFound("No such quote.", code="quote_not_found")
    return quote


def _window_request(data: dict[str, Any], caller: Caller) -> LeaseRequest:
    missing = [name for name in ("offer", "gpu_count", "start") if data.get(name) is None]
    if missing:
        raise ValidationFailed(
            "Give a hold, a quote, or an offer with gpu_count and a window.",
            detail={name: ["This field is required."] for name in missing},
        )
    return request_build(
        offer=_visible_offer(data["offer"], caller),
        gpu_count=data["gpu_count"],
        start=data["start"],
        end=data.get("end"),
        hours=data.get("hours"),
        pricing_mode=data.get("pricing_mode", PricingMode.ON_DEMAND),
        term_months=data.get("term_months"),
    )


class HoldViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Hold],
):
    """The caller's holds: short reservations of specific GPUs."""

    queryset = Hold.objects.prefetch_related(ALLOCATIONS)
    serializer_class = HoldSerializer
    tenant_fields = ("customer",)
    ordering_fields = ["id", "created_at", "expires_at"]
    filterset_fields = ["status", "offer"]

    @extend_schema(request=HoldInputSerializer, responses={201: HoldSerializer})
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        customer = _require_customer(request)
        data = read_input(HoldInputSerializer, request.data)
        quote = _own_quote(data["quote"], customer) if data.get("quote") else None
        lease_request = (
            request_from_quote(quote) if quote is not None else _window_request(data, self.caller)
        )
        hold = hold_create(
            customer=customer,
            request=lease_request,
            quote=quote,
            tags=data.get("tags"),
            actor=_actor(request),
        )
        answered = self.get_queryset().prefetch_related(None).prefetch_related(ANSWER_ALLOCATIONS)
        return Response(
            HoldSerializer(answered.get(pk=hold.pk)).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(request=None, responses=HoldSerializer)
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str | None = None) -> Response:
        """Give the GPUs back before the hold expires."""
        hold = hold_release(hold=self.get_object(), actor=_actor(request))
        return Response(HoldSerializer(self.get_queryset().get(pk=hold.pk)).data)


class LeaseViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Lease],
):
    """Leases: customers see theirs, providers the leases of their offers, operators all."""

    queryset = Lease.objects.select_related(
        "contract", "customer", "offer__provider", "offer__gpu_model"
    ).prefetch_related(ALLOCATIONS, "preemptions")
    serializer_class = LeaseSerializer
    tenant_fields = ("customer", "offer__provider")
    ordering_fields = ["id", "start", "end", "created_at"]
    filterset_fields = ["status", "pricing_mode", "workload", "offer"]

    @extend_schema(request=LeaseInputSerializer, responses={201: LeaseSerializer})
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        customer = _require_customer(request)
        data = read_input(LeaseInputSerializer, request.data)
        common = {
            "customer": customer,
            "workload": data.get("workload", Workload.UNSPECIFIED),
            "tags": data.get("tags"),
            "price_basis": data.get("price_basis", PriceBasis.FIXED),
            "actor": _actor(request),
        }
        if data.get("hold"):
            hold = Hold.objects.filter(pk=data["hold"], customer=customer).first()
            if hold is None:
                raise NotFound("No such hold.", code="hold_not_found")
            lease = lease_create(hold=hold, **common)
        elif data.get("quote"):
            lease = lease_create(quote=_own_quote(data["quote"], customer), **common)
        else:
            lease = lease_create(request=_window_request(data, self.caller), **common)
        # The caller's own lease, just made (so within get_queryset's scope), as LeaseSerializer
        # shows it.
        answer = LEASE_ANSWER.to_representation(lease_answer(lease.pk))
        return Response(answer, status=status.HTTP_201_CREATED)

    def _as_customer(self, lease: Lease) -> None:
        caller = self.caller
        if not caller.is_operator and lease.customer_id != caller.organization_id:
            raise Forbidden("Only the lessee can do this.", code="lessee_only")

    def _as_provider(self, lease: Lease) -> None:
        caller = self.caller
        if not caller.is_operator and lease.offer.provider_id != caller.organization_id:
            raise Forbidden("Only the provider can do this.", code="provider_only")

    @extend_schema(request=ExtendInputSerializer, responses=LeaseSerializer)
    @action(detail=True, methods=["post"])
    def extend(self, request: Request, pk: str | None = None) -> Response:
        """Extend on the same GPUs, if they are free until the new end."""
        lease = self.get_object()
        self._as_customer(lease)
        body = read_input(ExtendInputSerializer, request.data)
        lease_extend(lease=lease, new_end=body["end"], actor=_actor(request))
        return Response(LeaseSerializer(self.get_queryset().get(pk=lease.pk)).data)

    @extend_schema(request=LeaseExitInputSerializer, responses=LeaseSerializer)
    @action(detail=True, methods=["post"])
    @idempotent
    def exit(self, request: Request, pk: str | None = None) -> Response:
        """End early through the contract's exit terms (the fee is on the contract's events)."""
        lease = self.get_object()
        self._as_customer(lease)
        body = read_input(LeaseExitInputSerializer, request.data)
        lease_exit(
            lease=lease,
            party="lessee",
            exit_date=body["exit_date"],
            actor=_actor(request),
        )
        return Response(LeaseSerializer(self.get_queryset().get(pk=lease.pk)).data)

    @extend_schema(request=None, responses=LeaseSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        """Reject without fee after failed acceptance; the GPUs are freed now."""
        lease = self.get_object()
        self._as_customer(lease)
        lease_reject(lease=lease, actor=_actor(request))
        return Response(LeaseSerializer(self.get_queryset().get(pk=lease.pk)).data)

    @extend_schema(request=ReplaceGpuInputSerializer, responses=LeaseSerializer)
    @action(detail=True, methods=["post"], url_path="replace-gpu")
    def replace_gpu(self, request: Request, pk: str | None = None) -> Response:
        """Provider swaps a failed GPU for a free one; only that GPU is priced (exit terms)."""
        lease = self.get_object()
        self._as_provider(lease)
        body = read_input(ReplaceGpuInputSerializer, request.data)
        gpu = Gpu.objects.filter(pk=body["gpu"]).first()
        if gpu is None:
            raise NotFound("No such GPU.", code="gpu_not_found")
        lease_replace_gpu(lease=lease, failed_gpu=gpu, actor=_actor(request))
        return Response(LeaseSerializer(self.get_queryset().get(pk=lease.pk)).data)


def _visible_lease(view: OrganizationScopedMixin) -> Lease:
    """The lease of a nested route, if the caller may see it (the lease list's rule); else 404."""
    lease_id = str(view.kwargs["lease_pk"])  # type: ignore[attr-defined]
    leases = scope_queryset(
        Lease.objects.all(), caller=view.caller, fields=LeaseViewSet.tenant_fields
    )
    lease = leases.filter(pk=int(lease_id)).first() if lease_id.isdigit() else None
    if lease is None:
        raise NotFound("No such lease.", code="lease_not_found")
    return lease


# The lease of a nested route: its id, never null (the model's lease field may be).
LEASE_PK = OpenApiParameter("lease_pk", int, OpenApiParameter.PATH, description="The lease's id.")


@extend_schema(parameters=[LEASE_PK])
class AcceptanceRunViewSet(
    OrganizationScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet[AcceptanceRun]
):
    """GET/POST /api/v1/leases/{id}/acceptance-runs/ — measured results, judged by the engine."""

    queryset = AcceptanceRun.objects.all()
    serializer_class = AcceptanceRunSerializer
    tenant_fields = ("contract__lease__customer", "contract__lease__offer__provider")
    ordering_fields = ["ran_at", "id"]
    ordering = ["ran_at", "id"]

    def _lease(self) -> Lease:
        return _visible_lease(self)

    def get_queryset(self) -> QuerySet[AcceptanceRun]:
        return acceptance_runs_with_relations().filter(contract__lease=self._lease())

    @extend_schema(
        request=AcceptanceRunInputSerializer, responses={201: AcceptanceOutcomeSerializer}
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Submit a run: the lessee's (or an operator's) is judged now and may start billing;
        the provider's is a claim the lessee confirms or disputes at /acceptance-runs/{id}/."""
        lease = self._lease()
        data = read_input(AcceptanceRunInputSerializer, request.data)
        if not data.get("run_by"):
            data["run_by"] = _actor(request)
        organization = self.caller.organization
        lease, run, outcome = lease_acceptance_run_record(
            lease=lease,
            party=acceptance_submitter_of(contract=lease.contract, organization=organization),
            organization=organization,
            actor=_actor(request),
            **data,
        )
        body = acceptance_outcome_data(run=run, outcome=outcome, contract=lease.contract)
        return Response(AcceptanceOutcomeSerializer(body).data, status=status.HTTP_201_CREATED)


@extend_schema(parameters=[LEASE_PK])
class LeaseEventViewSet(
    OrganizationScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet[LeaseEvent]
):
    """GET /api/v1/leases/{id}/events/ — the lease's history (status changes, extensions,
    exit notice, GPU replacements, preemptions, rejection), oldest first."""

    queryset = LeaseEvent.objects.all()
    serializer_class = LeaseEventSerializer
    tenant_fields = ("lease__customer", "lease__offer__provider")
    filterset_class = LeaseEventFilter
    ordering_fields = ["effective_at", "id"]
    ordering = ["effective_at", "id"]

    def get_queryset(self) -> QuerySet[LeaseEvent]:
        return LeaseEvent.objects.filter(lease=_visible_lease(self))


class PreemptionNoticeViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[PreemptionNotice],
):
    """GET /api/v1/preemption-notices/ — notices that interruptible GPUs of the caller's leases
    are taken back (the customer's, and the provider's of the offer), newest first."""

    queryset = PreemptionNotice.objects.all()
    serializer_class = PreemptionNoticeSerializer
    tenant_fields = ("lease__customer", "lease__offer__provider")
    filterset_class = PreemptionNoticeFilter
    ordering_fields = ["cut_at", "id"]
    ordering = ["-id"]


# ---------------------------------------------------------------- acceptance runs of contracts


class ContractAcceptanceRunViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[AcceptanceRun],
):
    """GET /api/v1/acceptance-runs/ — acceptance runs of the caller's contracts (lessee or
    lessor; operators all), with their status and a claim's deadline. The lessee confirms or
    disputes a provider's claim; an operator decides a dispute. A lease follows its contract."""

    queryset = acceptance_runs_with_relations()
    serializer_class = AcceptanceRunSerializer
    tenant_fields = ("contract__lessor", "contract__lessee")
    filterset_class = AcceptanceRunFilter
    ordering_fields = ["id", "ran_at", "claim_expires_at"]

    def get_permissions(self) -> list[BasePermission]:
        if self.action == "decide":
            return [IsOperator()]
        return [HasOrganizationScope()]

    def _lessee(self) -> Organization:
        organization = self.caller.organization
        if organization is None:  # pragma: no cover - every API caller acts for one
            raise Forbidden("Only the lessee can answer a claim.", code="lessee_only")
        return organization

    def _outcome(self, run: AcceptanceRun, outcome: Any) -> Response:
        contract = Contract.objects.get(pk=run.contract_id)
        body = acceptance_outcome_data(run=run, outcome=outcome, contract=contract)
        return Response(AcceptanceOutcomeSerializer(body).data)

    @extend_schema(request=None, responses=AcceptanceOutcomeSerializer)
    @action(detail=True, methods=["post"])
    def confirm(self, request: Request, pk: str | None = None) -> Response:
        """The lessee confirms the provider's claim: it counts as if the lessee had posted it."""
        run, outcome = lease_acceptance_claim_confirm(
            run=self.get_object(), organization=self._lessee(), actor=_actor(request)
        )
        return self._outcome(run, outcome)

    @extend_schema(request=AcceptanceDisputeInputSerializer, responses=AcceptanceRunSerializer)
    @action(detail=True, methods=["post"])
    def dispute(self, request: Request, pk: str | None = None) -> Response:
        """The lessee disputes the provider's claim, with a reason; an operator decides it."""
        run = self.get_object()
        body = read_input(AcceptanceDisputeInputSerializer, request.data)
        run = lease_acceptance_claim_dispute(
            run=run,
            organization=self._lessee(),
            reason=body["reason"],
            actor=_actor(request),
        )
        return Response(AcceptanceRunSerializer(self.get_queryset().get(pk=run.pk)).data)

    @extend_schema(request=AcceptanceDecisionInputSerializer, responses=AcceptanceOutcomeSerializer)
    @action(detail=True, methods=["post"])
    def decide(self, request: Request, pk: str | None = None) -> Response:
        """Operators decide a disputed claim, pass or fail with a reason."""
        run = self.get_object()
        body = read_input(AcceptanceDecisionInputSerializer, request.data)
        run, outcome = lease_acceptance_dispute_decide(
            run=run,
            passed=body["passed"],
            reason=body["reason"],
            actor=_actor(request),
        )
        return self._outcome(run, outcome)
