"""Routes of holds, leases and acceptance runs."""

from core.api.routers import Router
from leasing.api.views_leasing import (
    AcceptanceRunViewSet,
    ContractAcceptanceRunViewSet,
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
# Every run of the caller's contracts, leased or not; confirm, dispute and decide live here.
router.register("acceptance-runs", ContractAcceptanceRunViewSet, basename="acceptance")

urlpatterns = router.urls
