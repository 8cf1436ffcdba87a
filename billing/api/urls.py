"""Routes of the billing API (paths, route names and basenames are part of the public contract)."""

from django.urls import path

from billing.api.budgets.views import BudgetViewSet, UsageAlertRuleViewSet, UsageAlertViewSet
from billing.api.cost_reports import CostReportView
from billing.api.deposits import LeaseDepositViewSet
from billing.api.resale_proceeds import ResaleProceedsViewSet
from billing.api.statements import ProviderStatementViewSet
from billing.api.views import (
    BalanceViewSet,
    CreditNoteViewSet,
    InvoiceViewSet,
    LedgerEntryViewSet,
    StripeWebhookView,
    UsageEventViewSet,
    UsageRollupViewSet,
)
from billing.api.views_funds import (
    BurnDownViewSet,
    CreditGrantViewSet,
    FundsPolicyViewSet,
    TopUpViewSet,
)
from core.api.routers import Router

router = Router()
router.register("usage/events", UsageEventViewSet, basename="usage-event")
router.register("usage/rollups", UsageRollupViewSet, basename="usage-rollup")
router.register("invoices", InvoiceViewSet, basename="invoice")
router.register("credit-notes", CreditNoteViewSet, basename="credit-note")
router.register("balances", BalanceViewSet, basename="balance")
router.register("ledger-entries", LedgerEntryViewSet, basename="ledger-entry")
router.register("budgets", BudgetViewSet, basename="budget")
router.register("usage-alert-rules", UsageAlertRuleViewSet, basename="usage-alert-rule")
router.register("usage-alerts", UsageAlertViewSet, basename="usage-alert")
router.register("payout-statements", ProviderStatementViewSet, basename="payout-statement")
router.register("credit-grants", CreditGrantViewSet, basename="credit-grant")
router.register("top-ups", TopUpViewSet, basename="top-up")
router.register("burn-down", BurnDownViewSet, basename="burn-down")
router.register("funds-policies", FundsPolicyViewSet, basename="funds-policy")
router.register("deposits", LeaseDepositViewSet, basename="deposit")
router.register("resale-proceeds", ResaleProceedsViewSet, basename="resale-proceeds")

urlpatterns = [
    *router.urls,
    path("cost-reports/", CostReportView.as_view(), name="cost-report"),
    # Stripe calls this route: signed deliveries, not the key-authenticated API.
    path("stripe/webhook", StripeWebhookView.as_view(), name="stripe-webhook"),
]
