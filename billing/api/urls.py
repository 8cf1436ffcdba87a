"""Routes of the billing API."""

from django.urls import re_path

from billing.api.economics import AssetViewSet, CapacitySignalViewSet, UnitEconomicsView
from billing.api.economics_fx import FxRateViewSet
from billing.api.invoices import CreditNoteViewSet, InvoiceViewSet
from billing.api.usage import UsageEventViewSet, UsageRollupViewSet
from core.api.routers import Router

router = Router()
router.register("usage/events", UsageEventViewSet, basename="usage-event")
router.register("usage/rollups", UsageRollupViewSet, basename="usage-rollup")
router.register("invoices", InvoiceViewSet, basename="invoice")
router.register("credit-notes", CreditNoteViewSet, basename="credit-note")
router.register("assets", AssetViewSet, basename="asset")
router.register("capacity-signals", CapacitySignalViewSet, basename="capacity-signal")
router.register("fx-rates", FxRateViewSet, basename="fx-rate")

urlpatterns = [
    *router.urls,
    re_path(r"^unit-economics/?$", UnitEconomicsView.as_view(), name="unit-economics"),
]
