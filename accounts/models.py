"""Organizations (provider, customer, operator), memberships and API keys."""

from __future__ import annotations

from babel import Locale
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from accounts.choices import KeyScope, Role
from core.history import audit_history

# A tax id as registered (EU VAT "DE123456789", "GB 123 4567 89", Australian ABN "51 824 753 556"):
# upper-case letters and digits, spaces, dots, dashes or slashes, with at least one digit.
TAX_ID_PATTERN = r"^[A-Z0-9][A-Z0-9 ./-]{1,30}[A-Z0-9]$"
_TERRITORIES = Locale("en").territories


def is_country_code(code: str) -> bool:
    """An ISO-3166 alpha-2 code babel knows a name for (not a region number like "150")."""
    return len(code) == 2 and code.isalpha() and code.isupper() and code in _TERRITORIES


def country_name(code: str) -> str:
    """The English name of a country code ("AU" -> "Australia"); the code when unknown."""
    return str(_TERRITORIES.get(code, code))


class Organization(models.Model):
    """A company on the marketplace: provider, customer (both at once) or the operator."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True)
    is_provider = models.BooleanField(default=False)
    is_customer = models.BooleanField(default=False)
    is_operator = models.BooleanField(
        default=False, help_text="Marketplace operator staff: sees every organization's data."
    )
    country = models.CharField(max_length=2, blank=True, help_text="ISO-3166 alpha-2.")
    billing_emails = models.JSONField(
        default=list, blank=True, help_text="Addresses that receive invoices."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(is_provider=True) | Q(is_customer=True) | Q(is_operator=True),
                name="organization_has_a_kind",
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def kinds(self) -> list[str]:
        """The roles this organization plays on the marketplace."""
        flags = {
            "provider": self.is_provider,
            "customer": self.is_customer,
            "operator": self.is_operator,
        }
        return [kind for kind, on in flags.items() if on]


class Membership(models.Model):
    """A user's role inside one organization."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "organization"], name="membership_unique_user_org"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.organization} ({self.role})"


class ApiKey(models.Model):
    """An organization's API key; only its SHA-256 hash is stored, the raw key is shown once."""

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(
        max_length=16, unique=True, help_text="Public part of the key, shown in lists."
    )
    key_hash = models.CharField(max_length=64, unique=True)
    scope = models.CharField(max_length=8, choices=KeyScope.choices, default=KeyScope.READ)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_by_key = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="created_keys",
        help_text="The API key that created this one; empty when a person or a command did.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} (ch_{self.prefix}_…)"

    @property
    def is_active(self) -> bool:
        """Not revoked and not expired."""
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > timezone.now()

    @property
    def can_write(self) -> bool:
        """Write scope allows unsafe methods; read scope only GET/HEAD/OPTIONS."""
        return self.scope == KeyScope.WRITE


class BillingProfile(models.Model):
    """Who an organization is on invoices and credit notes: legal name, postal address, tax id
    and the address that receives its invoices (accounts.services.billing_profile_update)."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, primary_key=True, related_name="billing_profile"
    )
    legal_name = models.CharField(max_length=200)
    address_line1 = models.CharField(max_length=200)
    address_line2 = models.CharField(max_length=200, blank=True)
    postal_code = models.CharField(max_length=20, blank=True)
    city = models.CharField(max_length=100)
    region = models.CharField(max_length=100, blank=True, help_text="State, province or county.")
    country = models.CharField(max_length=2, help_text="ISO-3166 alpha-2, upper case.")
    tax_id = models.CharField(
        max_length=32, blank=True, help_text="VAT, GST or ABN number as registered, upper case."
    )
    billing_email = models.EmailField(blank=True, help_text="Receives invoices and credit notes.")
    updated_at = models.DateTimeField(auto_now=True)
    history = audit_history()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=~Q(legal_name="") & ~Q(address_line1="") & ~Q(city=""),
                name="billing_profile_has_name_and_address",
            ),
            models.CheckConstraint(
                condition=Q(country__regex=r"^[A-Z]{2}$"), name="billing_profile_country_iso"
            ),
            models.CheckConstraint(
                condition=Q(tax_id="") | Q(tax_id__regex=TAX_ID_PATTERN),
                name="billing_profile_tax_id_shape",
            ),
        ]

    def __str__(self) -> str:
        return self.legal_name

    @property
    def address_lines(self) -> list[str]:
        """The postal address as printed on a document, line by line."""
        place = " ".join(part for part in (self.postal_code, self.city) if part)
        lines = [
            self.address_line1,
            self.address_line2,
            place,
            self.region,
            country_name(self.country),
        ]
        return [line for line in lines if line]
