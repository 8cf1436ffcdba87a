"""Routes of the billing API."""

from billing.api.invoices import CreditNoteViewSet, InvoiceViewSet
from billing.api.usage import UsageEventViewSet, UsageRollupViewSet
from core.api.routers import Router

router = Router()
router.register("usage/events", UsageEventViewSet, basename="usage-event")
router.register("usage/rollups", UsageRollupViewSet, basename="usage-rollup")
router.register("invoices", InvoiceViewSet, basename="invoice")
router.register("credit-notes", CreditNoteViewSet, basename="credit-note")

urlpatterns = router.urls
