"""Routes of the billing API."""

from billing.api.usage import UsageEventViewSet, UsageRollupViewSet
from core.api.routers import Router

router = Router()
router.register("usage/events", UsageEventViewSet, basename="usage-event")
router.register("usage/rollups", UsageRollupViewSet, basename="usage-rollup")

urlpatterns = router.urls
