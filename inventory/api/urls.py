"""Routes of the inventory API (paths are part of the public contract)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from inventory.api.views.assets import GpuViewSet, NodeViewSet, OutageViewSet, SiteViewSet
from inventory.api.views.catalog import GpuModelViewSet, MarketPriceViewSet
from inventory.api.views.imports import NodeImportView, NodeImportViewSlash
from inventory.api.views.index import (
    IndexFixingViewSet,
    IndexSourceViewSet,
    MarketplaceFixingViewSet,
)
from inventory.api.views.llm import LlmModelViewSet

router = SimpleRouter()
router.register("gpu-models", GpuModelViewSet, basename="gpu-model")
router.register("llm-models", LlmModelViewSet, basename="llm-model")
router.register("market-prices", MarketPriceViewSet, basename="market-price")
router.register("index-sources", IndexSourceViewSet, basename="index-source")
router.register("indices/marketplace", MarketplaceFixingViewSet, basename="marketplace-fixing")
router.register("indices", IndexFixingViewSet, basename="index-fixing")
router.register("sites", SiteViewSet, basename="site")
router.register("nodes", NodeViewSet, basename="node")
router.register("gpus", GpuViewSet, basename="gpu")
router.register("outages", OutageViewSet, basename="outage")

urlpatterns = [
    # Before the router, or "import" would be read as a node id.
    path("nodes/import", NodeImportView.as_view(), name="node-import"),
    path("nodes/import/", NodeImportViewSlash.as_view()),
    *router.urls,
]
