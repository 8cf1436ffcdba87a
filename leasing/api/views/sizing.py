"""POST /api/v1/sizing/: which GPUs hold a model and a workload, and what they cost now.

Every organization may ask (it reads the catalogues and published offers, like capacity search);
nothing is stored, so the answer is computed per request. Every figure comes with its sentence.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.mixins import OrganizationScopedMixin
from accounts.permissions import ActsForOrganization
from core.api.serializers import read_input
from leasing.api.serializers.sizing import SizingAnswerSerializer, SizingRequestSerializer
from leasing.selectors.sizing import OVERHEAD_RULE, Fit, SizingAnswer, SizingRequest, sizing_answer


def _fit(fit: Fit) -> dict[str, Any]:
    placement, pick = fit.placement, fit.capacity
    capacity = None
    if pick is not None:
        result = pick.result
        capacity = {
            "offer_id": result.offer_id,
            "offer_name": result.offer_name,
            "provider": result.provider_slug,
            "site": result.site_name,
            "country": result.country,
            "city": result.city,
            "price_per_gpu_hour": result.price_per_gpu_hour,
            "price_per_month": pick.price_per_month,
            "currency": result.currency,
            "max_free_gpus_on_one_node": result.max_free_gpus_on_one_node,
        }
    return {
        "gpu_model": placement.gpu.slug,
        "gpu_model_name": placement.gpu.name,
        "gpus_per_node": placement.gpus,
        "memory_bytes_per_gpu": placement.gpu.memory_bytes,
        "weight_bytes_per_gpu": placement.weight_bytes_per_gpu,
        "kv_cache_bytes_per_gpu": placement.kv_cache_bytes_per_gpu,
        "overhead_bytes_per_gpu": placement.overhead_bytes_per_gpu,
        "needed_bytes_per_gpu": placement.needed_bytes_per_gpu,
        "headroom_bytes_per_gpu": placement.headroom_bytes_per_gpu,
        "memory_explanation": placement.memory_explanation,
        "decode": {
            "tokens_per_second_upper_bound": placement.decode_tokens_per_second_upper_bound,
            "tokens_per_second_per_sequence_upper_bound": (
                placement.decode_tokens_per_second_per_sequence_upper_bound
            ),
            "explanation": placement.decode_explanation,
        },
        "capacity": capacity,
        "capacity_explanation": fit.capacity_explanation,
    }


def _body(answer: SizingAnswer) -> dict[str, Any]:
    demand = answer.sizing.demand
    request = answer.request
    return {
        "model": answer.model.slug if answer.model is not None else None,
        "architecture": asdict(answer.architecture),
        "workload": {
            **asdict(answer.workload),
            "pricing_mode": request.pricing_mode,
            "term_months": request.term_months,
            "currency": request.currency,
        },
        "weights": {"bytes": demand.weight_bytes, "explanation": demand.weight_explanation},
        "kv_cache": {
            "bytes": demand.kv_cache_bytes,
            "bytes_per_token": demand.kv_cache_bytes_per_token,
            "explanation": demand.kv_cache_explanation,
        },
        "overhead_rule": OVERHEAD_RULE,
        "verdict": answer.verdict,
        "explanation": answer.explanation,
        "fits": [_fit(fit) for fit in answer.fits],
        "no_fit": [{"gpu_model": slug, "reason": reason} for slug, reason in answer.no_fit],
        "skipped_tensor_parallel_degrees": answer.sizing.skipped_degrees,
        "capacity_window": {"start": answer.window.start, "end": answer.window.end},
    }


class SizingView(OrganizationScopedMixin, APIView):
    """POST /api/v1/sizing/ — memory, fit, decode bound and current price per GPU model."""

    # A read-only key may ask: sizing is a question (POST only for its body) that stores nothing.
    permission_classes = [ActsForOrganization]

    @extend_schema(
        request=SizingRequestSerializer,
        responses={200: SizingAnswerSerializer, 400: OpenApiResponse(description="Bad input.")},
        description=(
            "Weights (parameters x bytes), KV cache (2 x layers x KV heads x head dim x bytes x "
            "context x concurrency; MLA: layers x latent x bytes x tokens), a stated overhead "
            "rule, and every GPU model and tensor-parallel degree (GPUs of one node) that holds "
            "them, with the cheapest offer free for the next 730 hours and its price per month, "
            "and an upper bound on decode tokens/s from memory bandwidth. A workload that fits "
            "nowhere is a 200 with verdict no_fit and the reasons; an impossible architecture "
            "or a context above the model's maximum is a 400 with a stable code."
        ),
    )
    def post(self, request: Request) -> Response:
        data = read_input(SizingRequestSerializer, request.data)
        architecture = data.get("architecture")
        question = SizingRequest(
            model=data.get("model"),
            architecture=dict(architecture) if architecture is not None else None,
            weight_precision=data.get("weight_precision"),
            kv_cache_precision=data["kv_cache_precision"],
            context_tokens=data["context_tokens"],
            concurrency=data["concurrency"],
            max_gpus_per_node=data["max_gpus_per_node"],
            pricing_mode=data["pricing_mode"],
            term_months=data.get("term_months"),
            currency=data["currency"].upper(),
        )
        answer = sizing_answer(request=question, now=timezone.now())
        return Response(SizingAnswerSerializer(_body(answer)).data)


class SizingViewNoSlash(SizingView):
    """/api/v1/sizing without the slash: the same view, documented once."""

    schema = None
