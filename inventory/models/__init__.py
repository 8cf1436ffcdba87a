"""Inventory: the GPU catalog, the model catalogue (open LLMs), the market index (registered
sources, observations, daily fixings), and each provider's asset register (sites, nodes, GPUs)
with the outages that the SLA and billing logic later read. One module per concern; import the
models from here."""

from inventory.models.assets import Gpu, Node, Outage, Site
from inventory.models.base import TsTzRange
from inventory.models.catalog import GpuModel
from inventory.models.llm import LlmModel
from inventory.models.market import IndexFixing, IndexSource, MarketPrice
from inventory.models.marketplace import MarketplaceFixing

__all__ = [
    "Gpu",
    "GpuModel",
    "IndexFixing",
    "IndexSource",
    "LlmModel",
    "MarketPrice",
    "MarketplaceFixing",
    "Node",
    "Outage",
    "Site",
    "TsTzRange",
]
