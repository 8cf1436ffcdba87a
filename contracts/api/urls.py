"""Routes of the contracts API."""

from contracts.api.views import ContractEventViewSet, ContractViewSet
from core.api.routers import Router

router = Router()
router.register("contracts", ContractViewSet, basename="contract")
router.register(
    r"contracts/(?P<contract_pk>[^/.]+)/events", ContractEventViewSet, basename="contract-event"
)

urlpatterns = router.urls
