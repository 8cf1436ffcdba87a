"""Views of the contracts API: parties read; operators create and amend; parties exit."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.errors import Forbidden
from accounts.models import Organization
from accounts.permissions import HasOrganizationScope, IsOperator
from accounts.selectors import scope_queryset
from contracts import engine
from contracts.api.backtest import BACKTEST_MAX_DAYS, IndexBacktestSerializer, index_backtest_data
from contracts.api.filters import ContractEventFilter, ContractFilter
from contracts.api.serializers import (
    AcceptanceOutcomeSerializer,
    AcceptanceRunInputSerializer,
    ContractAmendSerializer,
    ContractCreateSerializer,
    ContractEventSerializer,
    ContractSerializer,
    ExitInputSerializer,
    TerminationQuoteSerializer,
    acceptance_outcome_data,
)
from contracts.models import Contract, ContractEvent
from contracts.selectors import (
    acceptance_submitter_of,
    contract_index_backtest,
    contracts_with_relations,
    party_of,
)
from contracts.services import (
    acceptance_run_record,
    contract_activate,
    contract_amend,
    contract_create,
    contract_reject_at_acceptance,
    contract_request_exit,
    contract_termination_quote,
)
from core.api.idempotency import idempotent
from core.api.params import date_param, unknown_query_params_check
from core.api.serializers import read_input
from core.errors import NotFound, ValidationFailed

OPERATOR_ACTIONS = {"create", "partial_update", "activate"}


def _actor(request: Request) -> str:
    return str(request.user)


def _decision_data(decision: engine.Decision) -> dict[str, Any]:
    return {
        "kind": decision.kind,
        "effective_at": decision.effective_at,
        "explanation": decision.explanation,
        "amount": decision.amount,
        "currency": decision.amount.currency if decision.amount else None,
        "inputs": decision.inputs,
    }


def _quote_data(
    contract: Contract, party: str, exit_date: Any, quote: engine.TerminationQuote
) -> dict[str, Any]:
    return {
        "contract": contract.number,
        "party": party,
        "exit_date": exit_date,
        "effective_end": quote.effective_end,
        "notice_end": quote.notice_end,
        "fee": quote.fee,
        "currency": quote.fee.currency,
        "fee_free_reason": quote.fee_free_reason,
        "data_migration_until": quote.data_migration_until,
        "data_migration_party": quote.data_migration_party,
        "explanation": quote.explanation,
        "decisions": [_decision_data(d) for d in quote.decisions],
    }


class ContractViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Contract],
):
    """Contracts of the caller (as lessor or lessee); operators see and manage all."""

    queryset = contracts_with_relations()
    serializer_class = ContractSerializer
    tenant_fields = ("lessor", "lessee")
    filterset_class = ContractFilter
    ordering_fields = ["id", "term_start", "term_end", "created_at", "number"]
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_permissions(self) -> list[BasePermission]:
        if self.action in OPERATOR_ACTIONS:
            return [IsOperator()]
        return [HasOrganizationScope()]

    def _party(self, contract: Contract, requested: str | None) -> str:
        """The side the caller acts for; operators name it, parties cannot act for the other."""
        party = party_of(contract=contract, organization=self.caller.organization)
        if party is None:
            if not self.caller.is_operator:
                raise Forbidden("You are not a party to this contract.", code="not_a_party")
            if requested is None:
                raise Forbidden(
                    "Operators must name the party they act for.", code="party_required"
                )
            return requested
        if requested is not None and requested != party:
            raise Forbidden(f"You are the {party} of this contract.", code="wrong_party")
        return party

    @extend_schema(request=ContractCreateSerializer, responses={201: ContractSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = read_input(ContractCreateSerializer, request.data)
        parties = {
            role: Organization.objects.filter(slug=data.pop(role)).first()
            for role in ("lessor", "lessee")
        }
        for role, organization in parties.items():
            if organization is None:
                raise NotFound(f"No organization is the {role}.", code=f"unknown_{role}")
        contract = contract_create(
            lessor=parties["lessor"],  # type: ignore[arg-type]
            lessee=parties["lessee"],  # type: ignore[arg-type]
            actor=_actor(request),
            **data,
        )
        return Response(
            ContractSerializer(contracts_with_relations().get(pk=contract.pk)).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(request=ContractAmendSerializer, responses=ContractSerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        contract = self.get_object()
        changes = read_input(ContractAmendSerializer, request.data, partial=True)
        clauses = changes.pop("clauses", None)
        contract_amend(contract=contract, changes=changes, clauses=clauses, actor=_actor(request))
        return Response(ContractSerializer(contracts_with_relations().get(pk=contract.pk)).data)

    @extend_schema(request=None, responses=ContractSerializer)
    @action(detail=True, methods=["post"])
    def activate(self, request: Request, pk: str | None = None) -> Response:
        """Put a draft into force (pending acceptance, or active)."""
        contract = contract_activate(contract=self.get_object(), actor=_actor(request))
        return Response(ContractSerializer(contracts_with_relations().get(pk=contract.pk)).data)

    @extend_schema(request=ExitInputSerializer, responses=TerminationQuoteSerializer)
    @action(detail=True, methods=["post"], url_path="termination-quote")
    def termination_quote(self, request: Request, pk: str | None = None) -> Response:
        """What exiting on a date would cost, and why; changes nothing."""
        contract = self.get_object()
        body = read_input(ExitInputSerializer, request.data)
        party = self._party(contract, body.get("party"))
        exit_date = body["exit_date"]
        quote = contract_termination_quote(contract=contract, party=party, exit_date=exit_date)
        return Response(
            TerminationQuoteSerializer(_quote_data(contract, party, exit_date, quote)).data
        )

    @extend_schema(request=ExitInputSerializer, responses={201: TerminationQuoteSerializer})
    @action(detail=True, methods=["post"], url_path="exit")
    @idempotent
    def exit(self, request: Request, pk: str | None = None) -> Response:
        """Give notice to exit: records the fee (or why none) and the migration window."""
        contract = self.get_object()
        body = read_input(ExitInputSerializer, request.data)
        party = self._party(contract, body.get("party"))
        exit_date = body["exit_date"]
        contract, quote = contract_request_exit(
            contract=contract, party=party, exit_date=exit_date, actor=_actor(request)
        )
        return Response(
            TerminationQuoteSerializer(_quote_data(contract, party, exit_date, quote)).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        request=AcceptanceRunInputSerializer, responses={201: AcceptanceOutcomeSerializer}
    )
    @action(detail=True, methods=["post"], url_path="acceptance-runs")
    def acceptance_runs(self, request: Request, pk: str | None = None) -> Response:
        """Submit an acceptance result: the lessee's (or an operator's) is judged now and may
        start billing; the lessor's is a claim the lessee confirms or disputes."""
        contract = self.get_object()
        body = read_input(AcceptanceRunInputSerializer, request.data)
        run, outcome = acceptance_run_record(
            contract=contract,
            party=acceptance_submitter_of(contract=contract, organization=self.caller.organization),
            organization=self.caller.organization,
            actor=_actor(request),
            **body,
        )
        contract.refresh_from_db()
        body = acceptance_outcome_data(run=run, outcome=outcome, contract=contract)
        return Response(AcceptanceOutcomeSerializer(body).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=ContractSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        """The lessee rejects the hardware without fee after failed acceptance."""
        contract = self.get_object()
        if self._party(contract, "lessee" if self.caller.is_operator else None) != "lessee":
            raise Forbidden("Only the lessee can reject at acceptance.", code="lessee_only")
        contract = contract_reject_at_acceptance(contract=contract, actor=_actor(request))
        return Response(ContractSerializer(contracts_with_relations().get(pk=contract.pk)).data)


class ContractEventViewSet(
    OrganizationScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet[ContractEvent]
):
    """GET /api/v1/contracts/{id}/events/ — every decision and transition, oldest first."""

    queryset = ContractEvent.objects.select_related("contract")
    serializer_class = ContractEventSerializer
    tenant_fields = ("contract__lessor", "contract__lessee")
    filterset_class = ContractEventFilter
    ordering_fields = ["effective_at", "id"]
    ordering = ["effective_at", "id"]

    def get_queryset(self) -> QuerySet[ContractEvent]:
        contract_id = self.kwargs["contract_pk"]
        contracts = scope_queryset(
            Contract.objects.filter(pk=contract_id)
            if str(contract_id).isdigit()
            else Contract.objects.none(),
            caller=self.caller,
            fields=ContractViewSet.tenant_fields,
        )
        if not contracts.exists():
            raise NotFound("No such contract.", code="contract_not_found")
        return super().get_queryset().filter(contract_id=contract_id)


class ContractIndexBacktestViewSet(OrganizationScopedMixin, viewsets.ViewSet):
    """GET /api/v1/contracts/{id}/index-backtest/?from=YYYY-MM-DD[&to=YYYY-MM-DD] — what the
    contract would have cost under its index_linked clause over past fixings, month by month,
    against the fixed alternative. Both parties read it; anyone else gets 404."""

    tenant_fields = ("lessor", "lessee")
    query_params = ("from", "to")

    @extend_schema(
        request=None,
        responses=IndexBacktestSerializer,
        parameters=[
            OpenApiParameter("from", OpenApiTypes.DATE, required=True),
            OpenApiParameter("to", OpenApiTypes.DATE, description="Exclusive; default today."),
        ],
    )
    def list(self, request: Request, contract_pk: str | None = None) -> Response:
        """The backtest of one contract (another tenant's contract answers 404 first)."""
        contract_id = str(contract_pk)
        contract = self.scope(
            Contract.objects.filter(pk=int(contract_id))
            if contract_id.isdigit()
            else Contract.objects.none()
        ).first()
        if contract is None:
            raise NotFound("No such contract.", code="contract_not_found")
        unknown_query_params_check(request, self)  # once the contract is found (404 first)
        params = request.query_params
        start = date_param(params, "from")
        end = date_param(params, "to") or timezone.now().astimezone(UTC).date()
        if start is None:
            raise ValidationFailed(
                "`from` is required (YYYY-MM-DD).", code="required", detail={"field": "from"}
            )
        if start >= end:
            raise ValidationFailed(
                "`from` must be before `to` (default: today).",
                code="invalid_window",
                detail={"field": "from"},
            )
        if (end - start).days > BACKTEST_MAX_DAYS:
            raise ValidationFailed(
                "A backtest covers at most ten years.",
                code="window_too_long",
                detail={"field": "from"},
            )
        clause, backtest = contract_index_backtest(contract, start=start, end=end)
        data = index_backtest_data(contract, clause, backtest, start=start, end=end)
        return Response(IndexBacktestSerializer(data).data)
