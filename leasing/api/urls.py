"""Routes of the leasing API (paths, route names and basenames are part of the public contract)."""

from django.urls import path

from core.api.routers import Router
from leasing.api.views.catalog import (
    CapacityView,
    CapacityViewNoSlash,
    OfferViewSet,
    QuoteViewSet,
    SlaOfferingViewSet,
)
from leasing.api.views.leases import (
    AcceptanceRunViewSet,
    ContractAcceptanceRunViewSet,
    HoldViewSet,
    LeaseEventViewSet,
    LeaseViewSet,
    PreemptionNoticeViewSet,
)
from leasing.api.views.resale import ResaleListingViewSet
from leasing.api.views.sizing import SizingView, SizingViewNoSlash

router = Router()
router.register("offers", OfferViewSet, basename="offer")
router.register("sla-offerings", SlaOfferingViewSet, basename="sla-offering")
router.register("quotes", QuoteViewSet, basename="quote")
router.register("holds", HoldViewSet, basename="hold")
router.register("leases", LeaseViewSet, basename="lease")
router.register(
    r"leases/(?P<lease_pk>[^/.]+)/acceptance-runs", AcceptanceRunViewSet, basename="acceptance-run"
)
router.register(r"leases/(?P<lease_pk>[^/.]+)/events", LeaseEventViewSet, basename="lease-event")
router.register("resale-listings", ResaleListingViewSet, basename="resale-listing")
router.register("preemption-notices", PreemptionNoticeViewSet, basename="preemption-notice")
# Every run of the caller's contracts, leased or not; confirm, dispute and decide live here.
router.register("acceptance-runs", ContractAcceptanceRunViewSet, basename="acceptance")

urlpatterns = [
    # Capacity is a computed search, not a collection of rows: a plain view, slash optional.
    path("capacity/", CapacityView.as_view(), name="capacity"),
    path("capacity", CapacityViewNoSlash.as_view()),
    # Sizing computes an answer from the catalogues and offers; nothing is stored.
    path("sizing/", SizingView.as_view(), name="sizing"),
    path("sizing", SizingViewNoSlash.as_view()),
    *router.urls,
]
