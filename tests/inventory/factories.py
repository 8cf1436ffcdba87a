"""Inventory test data, built through the same services the API calls."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from accounts.models import Organization
from inventory.models import Node, Site
from inventory.schemas import NodeInput, SiteInput
from inventory.services import node_create, site_create


def site_payload(**overrides: Any) -> dict[str, Any]:
    """A valid site body for the API."""
    return {
        "name": "Melbourne MEL1",
        "country": "AU",
        "city": "Melbourne",
        "region": "AU-VIC",
        "pue": "1.35",
        "power_price_per_kwh": "0.28",
        "power_currency": "AUD",
        "opex_per_node_month": "1800.00",
        "opex_currency": "AUD",
        "fault_domain": "hall-a",
        "tier": "tier_3",
        **overrides,
    }


def node_payload(**overrides: Any) -> dict[str, Any]:
    """A valid node body for the API (without the site)."""
    return {
        "hostname": "gpu-01",
        "serial": "SN-0001",
        "gpu_model": "h200-sxm",
        "gpu_count": 8,
        "cpu_cores": 112,
        "ram_gb": 2048,
        "nvme_tb": "30.72",
        "nvlink": True,
        "infiniband_gbit_s": 3200,
        "ethernet_gbit_s": 200,
        "status": "active",
        "capex": "620000.00",
        "capex_currency": "AUD",
        "acquired_on": "2024-10-15",
        "service_life_months": 60,
        "salvage_value": "60000.00",
        "power_full_kw": "10.2",
        "power_idle_kw": "2.5",
        **overrides,
    }


def make_site(organization: Organization, **overrides: Any) -> Site:
    """A site of the organization."""
    return site_create(organization=organization, fields=SiteInput(**site_payload(**overrides)))


def make_node(site: Site, **overrides: Any) -> Node:
    """A node (with its GPUs) at the site."""
    return node_create(site=site, fields=NodeInput(**node_payload(**overrides)))


ACQUIRED = date(2024, 10, 15)
CAPEX = Decimal("620000.00")
