"""The catalogue of webhook event types (plain data, no Django: settings read it too).

type → (who receives it, what happened). docs/webhooks.md and the OpenAPI document's `webhooks`
section list exactly these; `core.events.emit` refuses any other type.
"""

from __future__ import annotations

EVENT_TYPES: dict[str, tuple[str, str]] = {
    "lease.created": ("customer, provider", "A lease was created (from a hold, quote or window)."),
    "lease.started": ("customer, provider", "A lease became active (acceptance passed)."),
    "lease.preempted": (
        "customer, provider",
        "Interruptible GPUs of a lease were preempted; `data.notice` is the preemption notice.",
    ),
    "lease.ended": ("customer, provider", "A lease ended or was cancelled."),
    "sublease.ended": (
        "buyer, seller",
        "A sublease's parent lease ended early; `data.rule` says whether the sublease ended with"
        " it (end_with_refund) or runs on under the provider (continue_under_provider).",
    ),
    "acceptance.decided": (
        "lessee, lessor",
        "An acceptance outcome was decided for a contract (passed or failed).",
    ),
    "contract.price_step": ("lessee, lessor", "A generational price step changed the rate."),
    "contract.notice": ("lessee, lessor", "Notice of termination was given on a contract."),
    "contract.terminated": ("lessee, lessor", "A contract ended (its end reason is included)."),
    "invoice.issued": ("customer, issuer", "An invoice was finalized with its number."),
    "invoice.paid": ("customer, issuer", "An issued invoice was marked paid."),
    "credit_note.issued": ("customer, issuer", "A credit note was issued against an invoice."),
    "usage.events_rejected": (
        "provider",
        "A usage batch had rejected events; their ids and reasons are included.",
    ),
    "balance.low": (
        "customer",
        "A funds policy found the prepaid balance projected to run out within its days "
        "(`data.days_left`); once a day and policy.",
    ),
    "deposit.held": (
        "customer, provider",
        "A lease's deposit was taken from the customer's paid balance when the lease was made.",
    ),
    "deposit.released": (
        "customer, provider",
        "A lease ended: its deposit went back to the balance, less what overdue invoices owe.",
    ),
    "payout.created": (
        "provider",
        "A payout was made from the provider's monthly statement: its amount is reserved for it.",
    ),
    "payout.submitted": (
        "provider",
        "A payout was sent: a Stripe transfer was made, or the bank-transfer export written.",
    ),
    "payout.paid": (
        "provider",
        "A payout reached the provider (the Stripe transfer stood, or the operator confirmed the"
        " bank transfer).",
    ),
    "payout.failed": (
        "provider",
        "A payout failed (`data.failure_reason`); its amount is payable to the provider again.",
    ),
    "capacity_signal.raised": (
        "provider",
        "A pool's capacity signal is plan_scaling or act_now for the evaluated day.",
    ),
    "budget.threshold_crossed": (
        "customer",
        "A budget's monthly spend crossed one of its thresholds (once per budget, month and"
        " threshold).",
    ),
    "usage.alert": (
        "customer, provider",
        "A usage alert rule fired on a token-SLA contract's hourly rollups (once per run of"
        " breaching hours).",
    ),
}


def schema_name(event_type: str) -> str:
    """The module attribute of webhooks.api.schema that documents an event type."""
    return event_type.replace(".", "_")
