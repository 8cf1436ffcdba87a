"""Routes of the catalog side of the leasing API (paths are part of the public contract).

Register further viewsets on `router` (holds, leases … currently live in urls_leasing).
"""

from django.urls import path

from core.api.routers import Router
from leasing.api.views_catalog import (
    CapacityView,
    CapacityViewNoSlash,
    OfferViewSet,
    QuoteViewSet,
    SlaOfferingViewSet,
)

router = Router()
router.register("offers", OfferViewSet, basename="offer")
router.register("sla-offerings", SlaOfferingViewSet, basename="sla-offering")
router.register("quotes", QuoteViewSet, basename="quote")

urlpatterns = [
    # Capacity is a computed search, not a collection of rows: a plain view, slash optional.
    path("capacity/", CapacityView.as_view(), name="capacity"),
    path("capacity", CapacityViewNoSlash.as_view()),
    *router.urls,
]
