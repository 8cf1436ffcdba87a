"""Routes of holds, leases and acceptance runs."""

from core.api.routers import Router
from leasing.api.views_leasing import (
    AcceptanceRunViewSet,
    HoldViewSet,
    LeaseEventViewSet,
    LeaseViewSet,
)

router = Router()
router.register("holds", HoldViewSet, basename="hold")
router.register("leases", LeaseViewSet, basename="lease")
router.register(
    r"leases/(?P<lease_pk>[^/.]+)/acceptance-runs", AcceptanceRunViewSet, basename="acceptance-run"
)
router.register(r"leases/(?P<lease_pk>[^/.]+)/events", LeaseEventViewSet, basename="lease-event")

urlpatterns = router.urls
