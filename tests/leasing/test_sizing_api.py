"""POST /api/v1/sizing/ through real API keys: hand-computed figures for three catalogue models
at two contexts and two concurrencies, fits priced from current capacity, no fit, and 400s.

Figures used below (catalogue rows, inventory 0006; GPU catalog, inventory 0002):
- Llama 3.1 8B: 8,030,261,248 parameters, 32 layers, 8 KV heads, head dim 128, bf16.
- Mixtral 8x7B: 46,702,792,704 parameters (12,879,925,248 active), 32 layers, 8 KV heads, 128.
- DeepSeek-V3: 671e9 parameters (37e9 active), fp8, 61 layers, MLA latent of 576 numbers.
- H100 SXM 80 GiB at 3.35 TB/s; H200 SXM 141 GiB at 4.8 TB/s; MI300X 192 GiB at 5.3 TB/s.
- Overhead per GPU: 10 % of its memory (rounded up to a byte) + 2 GiB.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import ROUND_DOWN, Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.throttling import ApiKeyRateThrottle
from leasing.choices import PricingMode
from leasing.selectors import sizing as sizing_selectors
from tests.leasing.factories import busy, gpus_of, make_offer

pytestmark = pytest.mark.django_db

SIZING = "/api/v1/sizing/"
GIB = 2**30
H100_OVERHEAD = 8 * GIB + 2 * GIB  # 80 GiB x 10 % = 8 GiB exactly
H200_OVERHEAD = -(-141 * GIB // 10) + 2 * GIB  # 15,139,759,718.4 rounded up, + 2 GiB
MI300X_OVERHEAD = -(-192 * GIB // 10) + 2 * GIB


def ask(client, **body):
    return client.post(SIZING, body, format="json")


def upper_bound(tbps: str, concurrency: int, step_bytes: int) -> Decimal:
    """concurrency x bandwidth (bytes/s) / bytes each GPU reads per step, down to 0.1."""
    bound = concurrency * Decimal(tbps) * 10**12 / step_bytes
    return bound.quantize(Decimal("0.1"), rounding=ROUND_DOWN)


def fits_of(body, gpu_model):
    return [fit for fit in body["fits"] if fit["gpu_model"] == gpu_model]


# (model, context, concurrency, weight bytes, KV bytes, GPU, fewest GPUs that fit,
#  needed bytes per GPU there, bandwidth TB/s, weight bytes read per GPU per step)
CASES = [
    # Llama 3.1 8B, bf16 weights and KV: KV per token = 2 x 32 x 8 x 128 x 2 = 131,072 bytes.
    (
        "llama-3-1-8b", 8192, 1,
        8_030_261_248 * 2,                        # 16,060,522,496
        2 * 32 * 8 * 128 * 2 * 8192 * 1,          # 1,073,741,824 (1 GiB)
        "h100-sxm", 1,
        16_060_522_496 + 1_073_741_824 + H100_OVERHEAD,  # 27,871,682,560 <= 80 GiB
        "3.35", 16_060_522_496,
    ),
    (
        "llama-3-1-8b", 8192, 16,
        16_060_522_496,
        2 * 32 * 8 * 128 * 2 * 8192 * 16,         # 17,179,869,184 (16 GiB)
        "h100-sxm", 1,
        16_060_522_496 + 17_179_869_184 + H100_OVERHEAD,  # 43,977,809,920
        "3.35", 16_060_522_496,
    ),
    (
        "llama-3-1-8b", 32768, 1,
        16_060_522_496,
        2 * 32 * 8 * 128 * 2 * 32768 * 1,         # 4,294,967,296 (4 GiB)
        "h100-sxm", 1,
        16_060_522_496 + 4_294_967_296 + H100_OVERHEAD,  # 31,092,908,032
        "3.35", 16_060_522_496,
    ),
    (
        # 1 GPU would need 16.06e9 + 68.72e9 + 10.74e9 = 95.5e9 > 85.9e9 bytes: 2 GPUs, each
        # with half the weights and 4 of the 8 KV heads.
        "llama-3-1-8b", 32768, 16,
        16_060_522_496,
        2 * 32 * 8 * 128 * 2 * 32768 * 16,        # 68,719,476,736 (64 GiB)
        "h100-sxm", 2,
        16_060_522_496 // 2 + 68_719_476_736 // 2 + H100_OVERHEAD,  # 53,127,417,856
        "3.35", 16_060_522_496 // 2,
    ),
    # Mixtral 8x7B, bf16: every expert is held (93.4e9 bytes > one H100), 12.88e9 are read.
    (
        "mixtral-8x7b", 8192, 1,
        46_702_792_704 * 2,                       # 93,405,585,408
        2 * 32 * 8 * 128 * 2 * 8192 * 1,          # 1,073,741,824
        "h100-sxm", 2,
        93_405_585_408 // 2 + 1_073_741_824 // 2 + H100_OVERHEAD,  # 57,977,081,856
        "3.35", 12_879_925_248 * 2 // 2,
    ),
    (
        "mixtral-8x7b", 8192, 16,
        93_405_585_408,
        2 * 32 * 8 * 128 * 2 * 8192 * 16,         # 17,179,869,184
        "h100-sxm", 2,
        93_405_585_408 // 2 + 17_179_869_184 // 2 + H100_OVERHEAD,  # 66,030,145,536
        "3.35", 12_879_925_248,
    ),
    (
        "mixtral-8x7b", 32768, 1,
        93_405_585_408,
        2 * 32 * 8 * 128 * 2 * 32768 * 1,         # 4,294,967,296
        "h100-sxm", 2,
        93_405_585_408 // 2 + 4_294_967_296 // 2 + H100_OVERHEAD,  # 59,587,694,592
        "3.35", 12_879_925_248,
    ),
    (
        # 2 GPUs would need 46.70e9 + 34.36e9 + 10.74e9 = 91.8e9 > 85.9e9 bytes: 4 GPUs.
        "mixtral-8x7b", 32768, 16,
        93_405_585_408,
        2 * 32 * 8 * 128 * 2 * 32768 * 16,        # 68,719,476,736
        "h100-sxm", 4,
        93_405_585_408 // 4 + 68_719_476_736 // 4 + H100_OVERHEAD,  # 51,268,683,776
        "3.35", 12_879_925_248 * 2 // 4,
    ),
    # DeepSeek-V3, fp8 weights (1 byte), bf16 MLA cache: 61 x 576 x 2 = 70,272 bytes per token,
    # held whole by every GPU of the group. 671e9 / 8 + 10 GiB > 80 GiB: no H100 node holds it.
    (
        "deepseek-v3", 8192, 1,
        671_000_000_000 * 1,
        61 * 576 * 2 * 8192 * 1,                  # 575,668,224
        "h200-sxm", 8,
        671_000_000_000 // 8 + 575_668_224 + H200_OVERHEAD,  # 101,737,911,591
        "4.8", 37_000_000_000 // 8,
    ),
    (
        "deepseek-v3", 8192, 16,
        671_000_000_000,
        61 * 576 * 2 * 8192 * 16,                 # 9,210,691,584
        "h200-sxm", 8,
        83_875_000_000 + 9_210_691_584 + H200_OVERHEAD,  # 110,372,934,951
        "4.8", 4_625_000_000,
    ),
    (
        "deepseek-v3", 32768, 1,
        671_000_000_000,
        61 * 576 * 2 * 32768 * 1,                 # 2,302,672,896
        "mi300x", 4,
        671_000_000_000 // 4 + 2_302_672_896 + MI300X_OVERHEAD,  # 192,815,999,565
        "5.3", 37_000_000_000 // 4,
    ),
    (
        # On 4 MI300X: 167.75e9 + 36.84e9 + 22.76e9 = 227.4e9 > 206.2e9 bytes: 8 GPUs.
        "deepseek-v3", 32768, 16,
        671_000_000_000,
        61 * 576 * 2 * 32768 * 16,                # 36,842,766,336
        "mi300x", 8,
        671_000_000_000 // 8 + 36_842_766_336 + MI300X_OVERHEAD,  # 143,481,093,005
        "5.3", 37_000_000_000 // 8,
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("model", "context", "concurrency", "weights", "kv", "gpu", "gpus", "needed", "tbps", "read"),
    CASES,
    ids=[f"{case[0]}-{case[1]}ctx-{case[2]}seq" for case in CASES],
)
def test_sizing_matches_the_hand_computed_figures(
    customer, client_for, model, context, concurrency, weights, kv, gpu, gpus, needed, tbps, read
):
    response = ask(
        client_for(customer), model=model, context_tokens=context, concurrency=concurrency
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["weights"]["bytes"] == weights
    assert body["kv_cache"]["bytes"] == kv
    assert body["verdict"] == "fits"
    fewest = min(fits_of(body, gpu), key=lambda fit: fit["gpus_per_node"])
    assert fewest["gpus_per_node"] == gpus
    assert fewest["needed_bytes_per_gpu"] == needed
    assert fewest["headroom_bytes_per_gpu"] == fewest["memory_bytes_per_gpu"] - needed
    step = read + fewest["kv_cache_bytes_per_gpu"]
    bound = fewest["decode"]["tokens_per_second_upper_bound"]
    assert Decimal(bound) == upper_bound(tbps, concurrency, step)
    assert "Upper bound, not a forecast" in fewest["decode"]["explanation"]
    assert f"{weights:,} bytes" in body["weights"]["explanation"]
    assert f"{kv:,} bytes" in body["kv_cache"]["explanation"]


def test_the_smallest_case_reads_as_written(customer, client_for):
    body = ask(
        client_for(customer), model="llama-3-1-8b", context_tokens=8192, concurrency=1
    ).json()
    assert body["weights"]["explanation"] == (
        "Weights: 8,030,261,248 parameters x 2 bytes (bf16) = 14.95 GiB (16,060,522,496 bytes)."
    )
    assert body["kv_cache"]["explanation"] == (
        "KV cache: 2 (key and value) x 32 layers x 8 KV heads x head dimension 128 x 2 bytes "
        "(bf16) = 131,072 bytes per token; x 8,192 tokens of context x 1 sequence at once = "
        "1.00 GiB (1,073,741,824 bytes)."
    )
    h100 = fits_of(body, "h100-sxm")[0]
    assert h100["memory_explanation"] == (
        "On 1 h100-sxm GPU each GPU holds weights 14.95 GiB (1/1) + KV cache 1.00 GiB (the whole "
        "KV cache) + overhead 10.00 GiB (10 % of 80 GiB + 2 GiB) = 25.95 GiB of 80 GiB: fits "
        "with 54.04 GiB to spare."
    )
    # 3.35e12 / (16,060,522,496 + 1,073,741,824) = 195.51 tokens/s.
    assert h100["decode"]["tokens_per_second_upper_bound"] == "195.5"
    assert (
        "1 x 3,350,000,000,000 bytes/s / 17,134,264,320 = 195.5 tokens/s"
        in (h100["decode"]["explanation"])
    )
    assert body["overhead_rule"].startswith("Overhead per GPU: 10 % of its memory")
    assert [fit["gpus_per_node"] for fit in fits_of(body, "h100-sxm")] == [1, 2, 4, 8]


def test_deepseek_reads_as_a_mixture_of_experts_with_a_latent_cache(customer, client_for):
    body = ask(client_for(customer), model="deepseek-v3", context_tokens=8192, concurrency=1).json()
    assert body["weights"]["explanation"].startswith(
        "Weights: 671,000,000,000 parameters x 1 byte (fp8) = 624.91 GiB"
    )
    assert "a token reads 37,000,000,000 active parameters" in body["weights"]["explanation"]
    assert body["kv_cache"]["explanation"].startswith(
        "KV cache: 61 layers x a latent of 576 numbers x 2 bytes (bf16) = 70,272 bytes per token"
    )
    h200 = fits_of(body, "h200-sxm")[0]
    assert (
        "KV cache 0.53 GiB (all of it: MLA's latent is not split by heads)"
        in (h200["memory_explanation"])
    )
    assert "of the active weights" in h200["decode"]["explanation"]


def test_qwen_on_eight_gpus_is_skipped_because_eight_does_not_divide_28_heads(customer, client_for):
    body = ask(client_for(customer), model="qwen2-5-7b", context_tokens=4096, concurrency=4).json()
    assert {fit["gpus_per_node"] for fit in body["fits"]} == {1, 2, 4}
    assert body["skipped_tensor_parallel_degrees"] == [
        "8 GPUs do not divide the 28 attention heads."
    ]


def test_each_fit_carries_the_cheapest_current_capacity_on_one_node(
    customer, provider, other_provider, client_for
):
    # Offer A: one node of 4 H100 at 1.90; offer B: one node of 8 at 2.50; offer C in EUR.
    cheap = make_offer(
        provider, gpu_model_slug="h100-sxm", gpus_per_node=4, price_per_gpu_hour="1.90"
    )
    make_offer(
        other_provider, gpu_model_slug="h100-sxm", gpus_per_node=8, price_per_gpu_hour="2.50"
    )
    make_offer(provider, gpu_model_slug="h100-sxm", price_per_gpu_hour="0.50", currency="EUR")
    client = client_for(customer)
    body = ask(client, model="llama-3-1-8b", context_tokens=8192, concurrency=1).json()
    by_gpus = {fit["gpus_per_node"]: fit for fit in fits_of(body, "h100-sxm")}
    # 1.90 x GPUs x 730 h on offer A while it has the GPUs on one node; 8 GPUs only on B.
    assert by_gpus[1]["capacity"]["price_per_month"] == "1387.00"  # 1.90 x 1 x 730
    assert by_gpus[2]["capacity"]["price_per_month"] == "2774.00"  # 1.90 x 2 x 730
    assert by_gpus[4]["capacity"]["price_per_month"] == "5548.00"  # 1.90 x 4 x 730
    assert by_gpus[8]["capacity"]["price_per_month"] == "14600.00"  # 2.50 x 8 x 730
    assert by_gpus[8]["capacity"]["provider"] == other_provider.slug
    assert by_gpus[1]["capacity"]["currency"] == "USD"
    assert (
        "1 GPU x 730 h (a month: 8,760 h / 12) = 1,387.00 USD per month"
        in (by_gpus[1]["capacity_explanation"])
    )
    # Cheapest first: the fits with capacity lead, priced per month.
    assert body["fits"][0]["capacity"]["price_per_month"] == "1387.00"
    assert body["explanation"].endswith(
        "Cheapest with free capacity: 1 h100-sxm GPU at 1,387.00 USD per month."
    )
    assert fits_of(body, "h200-sxm")[0]["capacity"] is None
    assert fits_of(body, "h200-sxm")[0]["capacity_explanation"].startswith(
        "No published on-demand offer in USD has 1 h200-sxm GPU free on one node"
    )
    # One GPU of offer A taken for a day this month: 3 left on its node, so 4 GPUs move to B.
    start = body["capacity_window"]["start"]
    busy(gpus_of(cheap.pool_nodes)[:1], *_day_after(start))
    body = ask(client, model="llama-3-1-8b", context_tokens=8192, concurrency=1).json()
    by_gpus = {fit["gpus_per_node"]: fit for fit in fits_of(body, "h100-sxm")}
    assert by_gpus[2]["capacity"]["offer_id"] == cheap.pk
    assert by_gpus[4]["capacity"]["price_per_month"] == "7300.00"  # 2.50 x 4 x 730


def _day_after(start: str) -> tuple[datetime, datetime]:
    """A day-long period starting a day after `start` (inside the sizing month)."""
    moment = datetime.fromisoformat(start.replace("Z", "+00:00")) + timedelta(days=1)
    return moment, moment + timedelta(days=1)


def test_reserved_sizing_prices_the_ladder_rung(customer, provider, client_for):
    make_offer(provider, gpu_model_slug="h100-sxm", price_per_gpu_hour="2.00")
    body = ask(
        client_for(customer),
        model="llama-3-1-8b",
        context_tokens=8192,
        concurrency=1,
        pricing_mode=PricingMode.RESERVED,
        term_months=12,
    ).json()
    one = fits_of(body, "h100-sxm")[0]
    # The factory's ladder gives 25 % off for 12 months: 2.00 x 0.75 = 1.50; x 730 h.
    assert one["capacity"]["price_per_gpu_hour"] == "1.500000"
    assert one["capacity"]["price_per_month"] == "1095.00"


def test_a_workload_that_fits_nowhere_is_a_200_with_no_fit_and_why(customer, client_for):
    # Llama 3.1 405B in bf16 on at most 4 GPUs of a node: 811.7e9 / 4 = 202.9e9 bytes of weights
    # per GPU, more than any catalogue GPU holds after its overhead.
    response = ask(
        client_for(customer),
        model="llama-3-1-405b",
        context_tokens=8192,
        concurrency=1,
        max_gpus_per_node=4,
    )
    assert response.status_code == 200
    body = response.json()
    assert body["verdict"] == "no_fit"
    assert body["fits"] == []
    assert body["weights"]["bytes"] == 405_853_388_800 * 2
    assert body["explanation"].startswith("No fit: weights of 755.96 GiB")
    reasons = {row["gpu_model"]: row["reason"] for row in body["no_fit"]}
    assert reasons["mi300x"].startswith("mi300x: even on 4 GPUs of one node each GPU needs")
    assert len(reasons) == 10


def test_an_explicit_architecture_is_sized_like_a_catalogue_model(customer, client_for):
    # The Llama 3.1 8B figures given by hand, with int4 weights and an fp8 cache:
    # weights 8,030,261,248 x 0.5 = 4,015,130,624; KV 2 x 32 x 8 x 128 x 1 x 4096 x 2.
    body = ask(
        client_for(customer, scope="read"),
        architecture={
            "parameters": 8_030_261_248,
            "layers": 32,
            "attention_heads": 32,
            "kv_heads": 8,
            "head_dim": 128,
        },
        weight_precision="int4",
        kv_cache_precision="fp8",
        context_tokens=4096,
        concurrency=2,
    ).json()
    assert body["model"] is None
    assert body["weights"]["bytes"] == 4_015_130_624
    assert body["kv_cache"]["bytes"] == 2 * 32 * 8 * 128 * 1 * 4096 * 2  # 536,870,912
    assert body["architecture"]["active_parameters"] == 8_030_261_248


def test_more_gpus_than_kv_heads_replicate_them(customer, client_for):
    # 2 KV heads on 8 GPUs: each GPU holds one head, i.e. half of the cache.
    body = ask(
        client_for(customer),
        architecture={
            "parameters": 1_000_000_000,
            "layers": 10,
            "attention_heads": 16,
            "kv_heads": 2,
            "head_dim": 64,
        },
        context_tokens=1000,
        concurrency=1,
    ).json()
    kv = 2 * 10 * 2 * 64 * 2 * 1000  # 5,120,000
    eight = next(fit for fit in fits_of(body, "h100-sxm") if fit["gpus_per_node"] == 8)
    assert eight["kv_cache_bytes_per_gpu"] == kv // 2
    assert "each held by 4 GPUs" in eight["memory_explanation"]


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        (
            {"architecture": {"parameters": 10**9, "layers": 32, "attention_heads": 32,
                              "kv_heads": 5, "head_dim": 128}},
            400, "kv_heads_not_dividing", "architecture.kv_heads",
        ),
        (
            {"architecture": {"parameters": 10**9, "layers": 0, "attention_heads": 32,
                              "kv_heads": 8, "head_dim": 128}},
            400, "not_positive", "architecture.layers",
        ),
        (
            {"architecture": {"parameters": 10**9, "layers": 2, "attention_heads": 8,
                              "kv_heads": 8, "head_dim": 64, "attention": "mla"}},
            400, "latent_dim_required", "architecture.kv_latent_dim",
        ),
        (
            {"architecture": {"parameters": 10**9, "layers": 2, "attention_heads": 8,
                              "kv_heads": 8, "head_dim": 64, "max_context_tokens": 2048}},
            400, "context_above_model_max", "context_tokens",
        ),
        ({"model": "mistral-7b-v0-3", "context_tokens": 65536}, 400,
         "context_above_model_max", "context_tokens"),
        ({"model": "gpt-5"}, 400, "unknown_llm_model", "model"),
        ({}, 400, "model_or_architecture", "model"),
        ({"model": "llama-3-1-8b", "concurrency": 0}, 400, "not_positive", "concurrency"),
        ({"model": "llama-3-1-8b", "context_tokens": -1}, 400, "not_positive", "context_tokens"),
        ({"model": "llama-3-1-8b", "max_gpus_per_node": 0}, 400, "invalid_node_size",
         "max_gpus_per_node"),
        ({"model": "llama-3-1-8b", "pricing_mode": "reserved"}, 400, "term_months_required",
         "term_months"),
        ({"model": "llama-3-1-8b", "term_months": 3}, 400, "term_months_only_for_reserved",
         "term_months"),
        ({"model": "llama-3-1-8b", "currency": "XYZ"}, 400, "invalid_currency", "currency"),
        ({"model": "llama-3-1-8b", "weight_precision": "fp4"}, 400, "invalid", "weight_precision"),
        ({"model": "llama-3-1-8b", "context_tokens": "many"}, 400, "invalid", "context_tokens"),
        ({"model": "llama-3-1-8b", "batch": 4}, 400, "unknown_field", "batch"),
    ],
)  # fmt: skip
def test_impossible_input_is_a_400_with_a_stable_code(
    customer, client_for, body, status, code, field
):
    workload = {"context_tokens": 8192, "concurrency": 1}
    response = client_for(customer).post(SIZING, {**workload, **body}, format="json")
    assert response.status_code == status, response.content
    answer = response.json()
    assert answer["code"] == code
    detail = answer["detail"]
    assert detail.get("field") == field or field in detail.get("fields", detail), answer


def test_model_and_architecture_together_is_a_400(customer, client_for):
    response = ask(
        client_for(customer),
        model="llama-3-1-8b",
        architecture={"parameters": 1, "layers": 1, "attention_heads": 1, "kv_heads": 1,
                      "head_dim": 1},
        context_tokens=1,
        concurrency=1,
    )  # fmt: skip
    assert (response.status_code, response.json()["code"]) == (400, "model_or_architecture")


def test_sizing_needs_a_key(client):
    response = client.post(SIZING, {"model": "llama-3-1-8b"}, format="json")
    assert response.status_code == 401


def test_the_sizing_endpoint_is_in_the_openapi_document(customer, client_for):
    schema = client_for(customer).get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/sizing/"]["post"]
    assert "requestBody" in operation
    assert "200" in operation["responses"]


def test_the_answer_costs_the_same_queries_with_more_offers(customer, provider, client_for):
    """One query per GPU model that fits (its capacity search), however many offers exist."""
    client = client_for(customer)
    body = {"model": "llama-3-1-70b", "context_tokens": 8192, "concurrency": 1}
    make_offer(provider, gpu_model_slug="h200-sxm")
    ask(client, **body)  # warm the key's last-used stamp

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert ask(client, **body).status_code == 200
        return len(queries)

    few = count()
    for price in ("2.10", "2.20", "2.30", "2.50"):
        make_offer(provider, gpu_model_slug="h200-sxm", price_per_gpu_hour=price)
        make_offer(provider, gpu_model_slug="h100-sxm", price_per_gpu_hour=price)
    assert count() == few


def test_sizing_is_throttled_per_key_like_every_endpoint(customer, client_for, monkeypatch):
    monkeypatch.setattr(ApiKeyRateThrottle, "THROTTLE_RATES", {"api_key": "2/min"})
    client = client_for(customer)
    body = {"model": "llama-3-1-8b", "context_tokens": 1024, "concurrency": 1}
    assert [ask(client, **body).status_code for _ in range(2)] == [200, 200]
    third = ask(client, **body)
    assert (third.status_code, third.json()["code"]) == (429, "throttled")


def test_offers_are_paged_until_every_degree_has_its_cheapest(
    customer, provider, client_for, monkeypatch
):
    # Pages of one offer: the 8-GPU node is on the third page, cheapest first.
    monkeypatch.setattr(sizing_selectors, "_CAPACITY_PAGE", 1)
    make_offer(provider, gpu_model_slug="h100-sxm", gpus_per_node=1, price_per_gpu_hour="1.00")
    make_offer(provider, gpu_model_slug="h100-sxm", gpus_per_node=2, price_per_gpu_hour="1.50")
    eight = make_offer(
        provider, gpu_model_slug="h100-sxm", gpus_per_node=8, price_per_gpu_hour="3.00"
    )
    body = ask(
        client_for(customer), model="llama-3-1-8b", context_tokens=8192, concurrency=1
    ).json()
    months = {
        fit["gpus_per_node"]: fit["capacity"]["price_per_month"]
        for fit in fits_of(body, "h100-sxm")
    }
    # 1.00 x 1 x 730; 1.50 x 2 x 730; 3.00 x 4 x 730; 3.00 x 8 x 730.
    assert months == {1: "730.00", 2: "2190.00", 4: "8760.00", 8: "17520.00"}
    assert fits_of(body, "h100-sxm")[3]["capacity"]["offer_id"] == eight.pk
