"""Serializers of resale listings (shape only)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.api.fields import DecimalString, RateField
from core.api.serializers import StrictInputSerializer
from leasing.models import ResaleListing


class ResaleListingInputSerializer(StrictInputSerializer):
    """List GPUs of one of the caller's reserved leases for a future window inside it."""

    lease = serializers.IntegerField(help_text="The caller's active reserved lease.")
    gpu_count = serializers.IntegerField(min_value=1)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    ask_price_per_gpu_hour = RateField(help_text="The ask per GPU-hour, in `currency`.")
    currency = serializers.CharField(
        min_length=3, max_length=3, help_text="Must be the lease contract's currency."
    )


class ResaleListingSerializer(serializers.ModelSerializer[ResaleListing]):
    """A resale listing, its clause terms and (once sold) its sublease."""

    seller = serializers.CharField(source="seller.slug", read_only=True)
    provider = serializers.CharField(source="parent_lease.offer.provider.slug", read_only=True)
    gpu_model = serializers.CharField(source="parent_lease.offer.gpu_model.slug", read_only=True)
    ask_price_per_gpu_hour = DecimalString()
    floor_rate = DecimalString()
    provider_share_pct = DecimalString()
    marketplace_fee_pct = DecimalString()
    price_floor_pct = DecimalString()
    offer_type = serializers.SerializerMethodField(help_text='Always "resale".')

    class Meta:
        model = ResaleListing
        fields = [
            "id",
            "offer_type",
            "seller",
            "provider",
            "gpu_model",
            "parent_lease",
            "gpu_count",
            "start",
            "end",
            "ask_price_per_gpu_hour",
            "currency",
            "status",
            "consent_required",
            "consented_at",
            "provider_share_pct",
            "marketplace_fee_pct",
            "price_floor_pct",
            "floor_rate",
            "on_parent_end",
            "sublease",
            "sold_at",
            "closed_at",
            "created_at",
        ]
        read_only_fields = fields

    def get_offer_type(self, listing: ResaleListing) -> str:
        return "resale"


class ResaleOfferSerializer(serializers.Serializer[Any]):
    """An open listing as an offer of capacity search and quotes, marked `resale`."""

    offer_type = serializers.CharField(help_text='Always "resale": leased time resold.')
    listing = serializers.IntegerField(help_text="Buy it at POST /resale-listings/{id}/buy/.")
    provider = serializers.CharField()
    gpu_model = serializers.CharField()
    site = serializers.CharField()
    gpu_count = serializers.IntegerField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    price_per_gpu_hour = DecimalString()
    currency = serializers.CharField()
    total = DecimalString(help_text="The whole listing: GPUs x hours x ask, rounded once.")
