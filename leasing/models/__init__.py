"""The shop: offers, SLA offerings and their subscriptions, quotes and the shortfalls of quotes
that found no capacity, holds, leases, the GPU allocations behind them and their history."""

from leasing.models.allocations import Allocation, LeaseEvent, PreemptionNotice
from leasing.models.availability import NodeFreeSpan, PoolOutage, PoolSize
from leasing.models.holds_leases import Hold, HoldLimit, Lease
from leasing.models.offers import Offer
from leasing.models.quotes import Quote, QuoteShortfall
from leasing.models.resale import ResaleListing
from leasing.models.sla import SlaOffering, SlaSubscription

__all__ = [
    "Allocation",
    "Hold",
    "HoldLimit",
    "Lease",
    "LeaseEvent",
    "NodeFreeSpan",
    "Offer",
    "PoolOutage",
    "PoolSize",
    "PreemptionNotice",
    "Quote",
    "QuoteShortfall",
    "ResaleListing",
    "SlaOffering",
    "SlaSubscription",
]
