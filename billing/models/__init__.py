"""Billing models, one module per area; import them from here."""

from billing.models.invoices import (
    INVOICE_TRANSITIONS,
    ISSUED_STATUSES,
    BillingRun,
    BillingRunKind,
    CreditNote,
    CreditNoteLine,
    DocumentSequence,
    Invoice,
    InvoiceLine,
    InvoiceStatus,
    LineKind,
    NumberSeries,
    StripeCustomer,
    StripeEvent,
)
from billing.models.usage import (
    UsageBatch,
    UsageEvent,
    UsageRollup,
    UsageRollupRun,
    UsageStatus,
)

__all__ = [
    "INVOICE_TRANSITIONS",
    "ISSUED_STATUSES",
    "BillingRun",
    "BillingRunKind",
    "CreditNote",
    "CreditNoteLine",
    "DocumentSequence",
    "Invoice",
    "InvoiceLine",
    "InvoiceStatus",
    "LineKind",
    "NumberSeries",
    "StripeCustomer",
    "StripeEvent",
    "UsageBatch",
    "UsageEvent",
    "UsageRollup",
    "UsageRollupRun",
    "UsageStatus",
]
