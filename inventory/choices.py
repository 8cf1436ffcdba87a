"""Choices of the inventory models, with the allowed status transitions."""

from django.db import models


class Vendor(models.TextChoices):
    """Who designs the accelerator."""

    NVIDIA = "nvidia", "NVIDIA"
    AMD = "amd", "AMD"
    HUAWEI = "huawei", "Huawei"
    INTEL = "intel", "Intel"


class FormFactor(models.TextChoices):
    """How the accelerator is packaged into a server."""

    SXM = "sxm", "SXM module"
    OAM = "oam", "OAM module"
    PCIE = "pcie", "PCIe card"
    SUPERCHIP = "superchip", "Superchip (CPU + GPUs on one board)"
    MEZZANINE = "mezzanine", "Other mezzanine module"


class PriceTerm(models.TextChoices):
    """The commitment a market price was quoted for."""

    ON_DEMAND = "on_demand", "On demand"
    SPOT = "spot", "Spot / interruptible"
    RESERVED_1M = "reserved_1m", "Reserved 1 month"
    RESERVED_3M = "reserved_3m", "Reserved 3 months"
    RESERVED_6M = "reserved_6m", "Reserved 6 months"
    RESERVED_12M = "reserved_12m", "Reserved 12 months"
    RESERVED_24M = "reserved_24m", "Reserved 24 months"
    RESERVED_36M = "reserved_36m", "Reserved 36 months"


class SiteTier(models.TextChoices):
    """Uptime Institute tier of the data centre."""

    TIER_1 = "tier_1", "Tier I"
    TIER_2 = "tier_2", "Tier II"
    TIER_3 = "tier_3", "Tier III"
    TIER_4 = "tier_4", "Tier IV"


class NodeStatus(models.TextChoices):
    """Where a node is in its life: serving, being worked on, or gone for good."""

    ACTIVE = "active", "Active"
    MAINTENANCE = "maintenance", "Maintenance"
    RETIRED = "retired", "Retired"


# A retired node is written off; bringing it back would corrupt its depreciation history.
NODE_STATUS_TRANSITIONS: dict[str, frozenset[str]] = {
    NodeStatus.ACTIVE: frozenset({NodeStatus.MAINTENANCE, NodeStatus.RETIRED}),
    NodeStatus.MAINTENANCE: frozenset({NodeStatus.ACTIVE, NodeStatus.RETIRED}),
    NodeStatus.RETIRED: frozenset(),
}


class GpuHealth(models.TextChoices):
    """The last known health of one GPU."""

    OK = "ok", "OK"
    DEGRADED = "degraded", "Degraded"
    FAILED = "failed", "Failed"


class OutageKind(models.TextChoices):
    """Whether the provider announced the outage in advance."""

    PLANNED = "planned", "Planned"
    UNPLANNED = "unplanned", "Unplanned"


class OutageCause(models.TextChoices):
    """Why capacity was unavailable; SLA reports group by it."""

    MAINTENANCE = "maintenance", "Scheduled maintenance"
    HARDWARE = "hardware", "Hardware fault"
    NETWORK = "network", "Network"
    POWER = "power", "Power"
    COOLING = "cooling", "Cooling"
    SOFTWARE = "software", "Software / firmware"
    OTHER = "other", "Other"


class IndexSourceKind(models.TextChoices):
    """What an index source reports; provider list prices belong to one marketplace member."""

    EXCHANGE_TRADE = "exchange_trade", "Exchange trades"
    PUBLISHED_INDEX = "published_index", "Published index"
    PROVIDER_LIST_PRICE = "provider_list_price", "Provider list price"
    # The marketplace's own executed leases; fed by a job, never posted through the API.
    MARKETPLACE_TRADES = "marketplace_trades", "Marketplace trades"


class FixingStatus(models.TextChoices):
    """Whether a day's index could be fixed."""

    FIXED = "fixed", "Fixed"
    INSUFFICIENT_SOURCES = "insufficient_sources", "Insufficient independent sources"


class MarketplaceMode(models.TextChoices):
    """The pricing mode a marketplace fixing is for (the modes leases are priced in)."""

    ON_DEMAND = "on_demand", "On demand"
    RESERVED = "reserved", "Reserved"
    INTERRUPTIBLE = "interruptible", "Interruptible"


class MarketplaceBasis(models.TextChoices):
    """What a marketplace fixing rests on: enough trades, the external index, or nothing."""

    TRADES = "trades", "Marketplace trades"
    EXTERNAL_FALLBACK = "external_fallback", "External index (too few trades)"
    NONE = "none", "No rate (too few trades, no external fixing)"


class Precision(models.TextChoices):
    """How many bits a stored number takes: model weights or the KV cache."""

    BF16 = "bf16", "BF16 (16 bits)"
    FP8 = "fp8", "FP8 (8 bits)"
    INT8 = "int8", "INT8 (8 bits)"
    INT4 = "int4", "INT4 (4 bits)"


# Bits per stored number of each precision; sizing multiplies counts by these.
PRECISION_BITS = {
    Precision.BF16: 16,
    Precision.FP8: 8,
    Precision.INT8: 8,
    Precision.INT4: 4,
}


class AttentionKind(models.TextChoices):
    """What a model keeps in its KV cache per token and layer."""

    GQA = "gqa", "Multi-head / grouped-query attention (a key and a value per KV head)"
    MLA = "mla", "Multi-head latent attention (one compressed latent vector)"
