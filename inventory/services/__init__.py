"""Write use cases of the inventory app, one transaction each; `<entity>_<verb>` names.

Split by entity: sites, nodes (with their GPUs), outages, market observations, the market index
(sources and fixings), the model catalogue and the bulk import.
"""

from inventory.services.gpus import gpu_health_set, gpu_update
from inventory.services.imports import ImportedNode, ImportResult, nodes_import
from inventory.services.index import (
    FixingsComputed,
    index_fixings_compute,
    index_source_register,
    index_source_update,
)
from inventory.services.llm_models import llm_model_create, llm_model_update
from inventory.services.market import (
    MarketPricesRecorded,
    market_price_errors,
    market_prices_record,
)
from inventory.services.marketplace_index import (
    MarketplaceFixingsComputed,
    marketplace_fixings_record,
)
from inventory.services.nodes import node_create, node_delete, node_update
from inventory.services.outages import (
    outage_check,
    outage_create,
    outage_delete,
    outage_update,
)
from inventory.services.sites import site_create, site_delete, site_update

__all__ = [
    "FixingsComputed",
    "ImportResult",
    "ImportedNode",
    "MarketPricesRecorded",
    "MarketplaceFixingsComputed",
    "gpu_health_set",
    "gpu_update",
    "index_fixings_compute",
    "index_source_register",
    "index_source_update",
    "llm_model_create",
    "llm_model_update",
    "market_price_errors",
    "market_prices_record",
    "marketplace_fixings_record",
    "node_create",
    "node_delete",
    "node_update",
    "nodes_import",
    "outage_check",
    "outage_create",
    "outage_delete",
    "outage_update",
    "site_create",
    "site_delete",
    "site_update",
]
