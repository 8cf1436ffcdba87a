"""Typed clause parameters: one pydantic model per clause kind, checked before a contract holds it.

A clause is a flat JSON object whose `kind` selects the model, for example
`{"kind": "minimum_commitment", "basis": "spend", "monthly_minimum": "50000"}`.
The `{"kind": ..., "params": {...}}` shape is accepted too, so a row that stores the
parameters in a separate JSON column parses the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from itertools import pairwise
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from core.errors import ValidationFailed

Percent = Annotated[Decimal, Field(ge=0, le=100)]
OpenPercent = Annotated[Decimal, Field(gt=0, lt=100)]
PositiveDecimal = Annotated[Decimal, Field(gt=0)]
NonNegativeDecimal = Annotated[Decimal, Field(ge=0)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+(?:[-_.][a-z0-9]+)*$", max_length=64)]


def _rule_error(field: str, message: str) -> PydanticCustomError:
    """An error from a cross-field rule; parse_clause files it under `field`."""
    return PydanticCustomError("clause_rule", "{message}", {"field": field, "message": message})


def _require_iff(model: BaseModel, field: str, needed: bool, condition: str) -> None:
    """Raise when `field` is missing although `condition` holds, or set although it does not."""
    present = getattr(model, field) is not None
    if needed and not present:
        raise _rule_error(field, f"required when {condition}")
    if present and not needed:
        raise _rule_error(field, f"only allowed when {condition}")


class _Clause(BaseModel):
    """Common settings: unknown parameters are errors and parsed clauses never change."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ThroughputAcceptance(_Clause):
    """Billing starts once the hardware meets a measured throughput at a bounded quality loss."""

    kind: Literal["throughput_acceptance"]
    metric: Literal["output_tokens_per_s", "bf16_tflops", "allreduce_busbw_gbps"]
    model_name: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    input_length: PositiveInt | None = None
    output_length: PositiveInt | None = None
    concurrency: PositiveInt | None = None
    threshold: PositiveDecimal
    precision_tolerance_pct: Percent
    max_attempts: int = Field(default=3, ge=1)
    remedy_window_days: NonNegativeInt = 14
    # A run the lessor submits is a claim: the lessee confirms or disputes it within this many
    # hours (three days span a weekend); when nobody answers, `claim_silence` says what silence
    # means. "disputed" (the default) sends it to an operator, so the provider's word alone never
    # starts billing; "accepted" is deemed acceptance the lessee agreed to when it signed.
    claim_window_hours: int = Field(default=72, ge=1, le=24 * 30)
    claim_silence: Literal["accepted", "disputed"] = "disputed"

    @model_validator(mode="after")
    def _model_named_for_token_throughput(self) -> ThroughputAcceptance:
        # Tokens per second mean nothing without the model that produced them.
        if self.metric == "output_tokens_per_s" and self.model_name is None:
            raise _rule_error("model_name", "required when metric is output_tokens_per_s")
        return self


class GenerationalPriceStep(_Clause):
    """The rate steps down when a newer GPU generation ships or the market price drops."""

    kind: Literal["generational_price_step"]
    successor_model: Slug
    trigger: Literal["successor_ga", "market_drop"]
    market_drop_pct: OpenPercent | None = None
    step: Literal["percent", "repeg"]
    step_pct: OpenPercent | None = None
    premium_pct: Annotated[Decimal, Field(ge=-100)] = Decimal(0)
    floor_rate: NonNegativeDecimal
    min_months_between_steps: NonNegativeInt = 12
    max_steps: PositiveInt | None = None

    @model_validator(mode="after")
    def _parameters_match_trigger_and_step(self) -> GenerationalPriceStep:
        _require_iff(
            self, "market_drop_pct", self.trigger == "market_drop", "trigger is market_drop"
        )
        _require_iff(self, "step_pct", self.step == "percent", "step is percent")
        return self


FeeFreeTrigger = Literal["acceptance_failure", "sla_breaches", "provider_insolvency"]


class ExitTerms(_Clause):
    """Early exit: notice, fee, fee-free triggers, data migration and hardware replacement."""

    kind: Literal["exit_terms"]
    notice_days_lessee: NonNegativeInt
    notice_days_lessor: NonNegativeInt
    fee: Literal["months_of_rent", "percent_of_remaining", "none"]
    fee_months: PositiveDecimal | None = None
    fee_pct: Percent | None = None
    fee_free_triggers: tuple[FeeFreeTrigger, ...] = ()
    sla_breach_count: PositiveInt = 3
    sla_breach_window_months: PositiveInt = 6
    data_migration_days: NonNegativeInt = 0
    data_migration_party: Literal["lessor", "lessee"] | None = None
    replacement: Literal["like_for_like", "upgrade"] = "like_for_like"
    upgrade_factor: PositiveDecimal = Decimal(1)

    @model_validator(mode="after")
    def _parameters_match_fee(self) -> ExitTerms:
        _require_iff(self, "fee_months", self.fee == "months_of_rent", "fee is months_of_rent")
        _require_iff(
            self, "fee_pct", self.fee == "percent_of_remaining", "fee is percent_of_remaining"
        )
        if len(set(self.fee_free_triggers)) != len(self.fee_free_triggers):
            raise _rule_error("fee_free_triggers", "each trigger may be listed once")
        if self.data_migration_days > 0 and self.data_migration_party is None:
            # A migration window nobody is responsible for cannot be enforced.
            raise _rule_error("data_migration_party", "required when data_migration_days > 0")
        return self


class CreditRung(_Clause):
    """One rung of the availability ladder: uptime below `below_pct` earns `credit_pct`."""

    below_pct: Percent
    credit_pct: Percent


class SlaCredits(_Clause):
    """Service credits for missed availability and latency objectives."""

    kind: Literal["sla_credits"]
    availability_target_pct: Percent
    ladder: tuple[CreditRung, ...]
    ttft_p95_ms_target: PositiveDecimal | None = None
    ttft_credit_pct: Percent | None = None
    tpot_p99_ms_target: PositiveDecimal | None = None
    tpot_credit_pct: Percent | None = None
    max_credit_pct_per_period: Percent = Decimal(100)

    @model_validator(mode="after")
    def _ladder_sorted_and_pairs_complete(self) -> SlaCredits:
        # Checked here, not with min_length: pydantic adds a spurious "too short" to bad tuples.
        if not self.ladder:
            raise _rule_error("ladder", "at least one rung is required")
        for index, (upper, lower) in enumerate(pairwise(self.ladder)):
            if lower.below_pct >= upper.below_pct:
                raise _rule_error(
                    f"ladder.{index + 1}.below_pct", "rungs must be unique and sorted descending"
                )
            if lower.credit_pct < upper.credit_pct:
                # A worse uptime must never earn a smaller credit.
                raise _rule_error(
                    f"ladder.{index + 1}.credit_pct", "must not decrease down the ladder"
                )
        if self.ladder[0].below_pct > self.availability_target_pct:
            raise _rule_error("ladder.0.below_pct", "must not exceed availability_target_pct")
        for target, credit in (
            ("ttft_p95_ms_target", "ttft_credit_pct"),
            ("tpot_p99_ms_target", "tpot_credit_pct"),
        ):
            if (getattr(self, target) is None) != (getattr(self, credit) is None):
                raise _rule_error(
                    credit, f"{target} and {credit} go together: give both or neither"
                )
        return self


class MinimumCommitment(_Clause):
    """A monthly minimum of spend (contract currency) or card-hours; a shortfall is billed."""

    kind: Literal["minimum_commitment"]
    basis: Literal["spend", "card_hours"]
    monthly_minimum: PositiveDecimal


class Prepayment(_Clause):
    """A prepaid share or amount of the contract value, drawn down or held as a deposit."""

    kind: Literal["prepayment"]
    mode: Literal["draw_down", "deposit"]
    share_pct: Annotated[Decimal, Field(gt=0, le=100)] | None = None
    amount: PositiveDecimal | None = None

    @model_validator(mode="after")
    def _share_or_amount(self) -> Prepayment:
        if (self.share_pct is None) == (self.amount is None):
            raise _rule_error("amount", "give exactly one of share_pct and amount")
        return self


class IndexLinked(_Clause):
    """The GPU-hour rate follows the marketplace index: its fixing plus a spread, within a floor
    and a cap, reset every `reset_months` billing periods from the fixing of a named day (of the
    calendar month before each reset: a day 1..28, or "last")."""

    kind: Literal["index_linked"]
    index_mode: Literal["on_demand", "reserved", "interruptible"] = "on_demand"
    spread_type: Literal["percent", "absolute"]
    # percent: rate = fixing x (1 + spread / 100); absolute: rate = fixing + spread (per GPU-hour).
    spread: Decimal = Field(ge=-1_000_000, le=1_000_000)
    floor_rate: NonNegativeDecimal | None = None
    cap_rate: PositiveDecimal | None = None
    reset_months: int = Field(default=1, ge=1, le=12)
    # A day of the month 1..28, or "last"; a plain union so that a bad value reads as one error.
    fixing_day: int | str = "last"
    # The fixed rate the lessee could have signed instead (the quote's), for the backtest.
    fixed_alternative_rate: PositiveDecimal | None = None

    @model_validator(mode="after")
    def _bounds_spread_and_day_make_sense(self) -> IndexLinked:
        if (
            self.floor_rate is not None
            and self.cap_rate is not None
            and self.floor_rate > self.cap_rate
        ):
            raise _rule_error("floor_rate", "must not be above cap_rate")
        if self.spread_type == "percent" and self.spread <= -100:
            raise _rule_error(
                "spread", "a spread of -100 % or less makes the rate zero or negative"
            )
        if self.spread_type == "absolute" and self.spread < 0 and not self.floor_rate:
            # fixing + a negative spread turns negative when the index falls far enough.
            raise _rule_error(
                "spread", "a negative absolute spread needs a floor_rate above 0 (no negative rate)"
            )
        if isinstance(self.fixing_day, str) and self.fixing_day != "last":
            raise _rule_error("fixing_day", 'give a day of the month 1..28 or "last"')
        if isinstance(self.fixing_day, int) and not 1 <= self.fixing_day <= 28:
            raise _rule_error(
                "fixing_day",
                f'day {self.fixing_day} does not exist in every month: give 1..28 or "last"',
            )
        return self


class Assignment(_Clause):
    """Resale of leased time: whether the lessee may sublease GPUs for a window, on which terms,
    and what happens to a sublease when this (the parent) lease ends early."""

    kind: Literal["assignment"]
    resale_allowed: bool = False
    provider_consent_required: bool = False
    min_resale_window_hours: PositiveInt = 1
    # Shares of the buyer's payments: the provider's, the marketplace's; the seller gets the rest.
    provider_share_pct: Percent = Decimal(0)
    marketplace_fee_pct: Percent = Decimal(0)
    # The ask may not be below this percentage of the parent contract's GPU-hour rate.
    price_floor_pct: Percent = Decimal(0)
    on_parent_end: Literal["continue_under_provider", "end_with_refund"] = "end_with_refund"

    @model_validator(mode="after")
    def _shares_leave_something_for_the_seller(self) -> Assignment:
        if self.provider_share_pct + self.marketplace_fee_pct > 100:
            raise _rule_error(
                "marketplace_fee_pct",
                "provider_share_pct + marketplace_fee_pct must not exceed 100",
            )
        return self


ClauseModel = (
    ThroughputAcceptance
    | GenerationalPriceStep
    | ExitTerms
    | SlaCredits
    | MinimumCommitment
    | Prepayment
    | IndexLinked
    | Assignment
)
ClauseParams = Annotated[ClauseModel, Field(discriminator="kind")]
CLAUSE_ADAPTER: TypeAdapter[ClauseModel] = TypeAdapter(ClauseParams)
CLAUSE_KINDS: tuple[str, ...] = (
    "throughput_acceptance",
    "generational_price_step",
    "exit_terms",
    "sla_credits",
    "minimum_commitment",
    "prepayment",
    "index_linked",
    "assignment",
)


def _flatten(data: Any) -> Any:
    """Accept {"kind", "params": {...}} by merging the params into the top level."""
    if isinstance(data, Mapping) and set(data) == {"kind", "params"}:
        params = data["params"]
        if isinstance(params, Mapping):
            return {"kind": data["kind"], **params}
    return data


def _field_errors(error: ValidationError, prefix: str = "") -> dict[str, str]:
    """Turn a pydantic error into {"field.path": "message"}, dropping the union tag from paths."""
    messages: dict[str, list[str]] = {}
    for item in error.errors(include_url=False):
        loc = [str(part) for part in item["loc"]]
        if item["type"] in ("union_tag_invalid", "union_tag_not_found"):
            loc = ["kind"]
        elif loc and loc[0] in CLAUSE_KINDS:
            loc = loc[1:]
        ctx = item.get("ctx") or {}
        if item["type"] == "clause_rule":
            loc = str(ctx["field"]).split(".")
        path = prefix + (".".join(loc) or "clause")
        messages.setdefault(path, []).append(item["msg"])
    return {path: "; ".join(texts) for path, texts in messages.items()}


def parse_clause(data: Mapping[str, Any]) -> ClauseModel:
    """Validate one clause; raise ValidationFailed(code="invalid_clause") with per-field errors."""
    try:
        return CLAUSE_ADAPTER.validate_python(_flatten(data))
    except ValidationError as error:
        raise ValidationFailed(
            "The clause is not valid.",
            code="invalid_clause",
            detail={"field_errors": _field_errors(error)},
        ) from error


def validate_clause_set(clauses: Sequence[Mapping[str, Any]]) -> tuple[ClauseModel, ...]:
    """Validate a contract's clauses; every kind may appear once ("duplicate_clause" otherwise)."""
    parsed: list[ClauseModel] = []
    errors: dict[str, str] = {}
    for index, data in enumerate(clauses):
        try:
            parsed.append(CLAUSE_ADAPTER.validate_python(_flatten(data)))
        except ValidationError as error:
            errors.update(_field_errors(error, prefix=f"{index}."))
    if errors:
        raise ValidationFailed(
            "Some clauses are not valid.", code="invalid_clause", detail={"field_errors": errors}
        )
    first_position: dict[str, int] = {}
    for index, clause in enumerate(parsed):
        if clause.kind in first_position:
            errors[f"{index}.kind"] = (
                f"only one {clause.kind} clause is allowed per contract "
                f"(already at position {first_position[clause.kind]})"
            )
        first_position.setdefault(clause.kind, index)
    if "index_linked" in first_position and "generational_price_step" in first_position:
        # Two clauses moving the same rate would contradict each other.
        errors[f"{first_position['index_linked']}.kind"] = (
            "an index_linked rate cannot also have a generational_price_step clause"
        )
        if len(errors) == 1:
            raise ValidationFailed(
                "An index-linked rate cannot also step.",
                code="conflicting_clauses",
                detail={"field_errors": errors},
            )
    if errors:
        raise ValidationFailed(
            "A clause kind appears more than once.",
            code="duplicate_clause",
            detail={"field_errors": errors},
        )
    return tuple(parsed)
