"""Fixtures of the inventory tests: a site and a node for each of two providers."""

from __future__ import annotations

import pytest

from inventory.models import Node, Site
from tests.inventory.factories import make_node, make_site


@pytest.fixture
def site(provider) -> Site:
    return make_site(provider)


@pytest.fixture
def node(site) -> Node:
    return make_node(site)


@pytest.fixture
def other_site(other_provider) -> Site:
    return make_site(other_provider, name="Kuala Lumpur KUL2", country="MY", city="Kuala Lumpur")


@pytest.fixture
def other_node(other_site) -> Node:
    return make_node(other_site, hostname="kul-01", capex_currency="USD")
