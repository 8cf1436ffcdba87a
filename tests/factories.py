"""factory_boy factories shared by the tests; data goes through the same services users trigger."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from accounts.models import Organization


class UserFactory(factory.django.DjangoModelFactory):
    """A Django user with a usable password."""

    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.test")
    password = factory.django.Password("pw")


class OrganizationFactory(factory.django.DjangoModelFactory):
    """A customer organization unless told otherwise."""

    class Meta:
        model = Organization
        django_get_or_create = ("slug",)

    name = factory.Sequence(lambda n: f"Org {n}")
    slug = factory.Sequence(lambda n: f"org-{n}")
    is_customer = True


class ProviderFactory(OrganizationFactory):
    """A provider organization."""

    is_customer = False
    is_provider = True


class OperatorFactory(OrganizationFactory):
    """The marketplace operator."""

    is_customer = False
    is_operator = True
