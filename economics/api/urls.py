"""Routes of the economics API: assets and their economics, capacity signals, FX rates, unit
economics, a reseller's resale economics."""

from django.urls import re_path

from core.api.routers import Router
from economics.api.views import (
    AssetViewSet,
    CapacitySignalViewSet,
    FxRateViewSet,
    ResaleEconomicsView,
    UnitEconomicsView,
)

router = Router()
router.register("assets", AssetViewSet, basename="asset")
router.register("capacity-signals", CapacitySignalViewSet, basename="capacity-signal")
router.register("fx-rates", FxRateViewSet, basename="fx-rate")

urlpatterns = [
    *router.urls,
    re_path(r"^unit-economics/?$", UnitEconomicsView.as_view(), name="unit-economics"),
    re_path(r"^resale-economics/?$", ResaleEconomicsView.as_view(), name="resale-economics"),
]
