"""Routes of the inventory API (paths are part of the public contract)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from inventory.api.index import IndexFixingViewSet, IndexSourceViewSet
from inventory.api.views import (
    GpuModelViewSet,
    GpuViewSet,
    MarketPriceViewSet,
    NodeImportView,
    NodeViewSet,
    OutageViewSet,
    SiteViewSet,
)

router = SimpleRouter()
router.register("gpu-models", GpuModelViewSet, basename="gpu-model")
router.register("market-prices", MarketPriceViewSet, basename="market-price")
router.register("index-sources", IndexSourceViewSet, basename="index-source")
router.register("indices", IndexFixingViewSet, basename="index-fixing")
router.register("sites", SiteViewSet, basename="site")
router.register("nodes", NodeViewSet, basename="node")
router.register("gpus", GpuViewSet, basename="gpu")
router.register("outages", OutageViewSet, basename="outage")

urlpatterns = [
    # Before the router, or "import" would be read as a node id.
    path("nodes/import", NodeImportView.as_view(), name="node-import"),
    path("nodes/import/", NodeImportView.as_view()),
    *router.urls,
]
