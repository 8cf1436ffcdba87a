"""Routes of the contracts API."""

from contracts.api.views import (
    ContractEventViewSet,
    ContractIndexBacktestViewSet,
    ContractViewSet,
)
from core.api.routers import Router

router = Router()
router.register("contracts", ContractViewSet, basename="contract")
router.register(
    r"contracts/(?P<contract_pk>[^/.]+)/events", ContractEventViewSet, basename="contract-event"
)

router.register(
    r"contracts/(?P<contract_pk>[^/.]+)/index-backtest",
    ContractIndexBacktestViewSet,
    basename="contract-index-backtest",
)

urlpatterns = router.urls
