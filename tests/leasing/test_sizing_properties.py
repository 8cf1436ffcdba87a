"""leasing.sizing over generated architectures and workloads: the rules hold for any input the
API lets through (pure functions, no database)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from inventory.rules import llm_architecture_errors
from leasing.sizing import GIB, Architecture, GpuSpec, Workload, demand, size

H100 = GpuSpec(slug="h100-sxm", name="H100", memory_gb=80, memory_bandwidth_tbps=Decimal("3.35"))
MI300X = GpuSpec(slug="mi300x", name="MI300X", memory_gb=192, memory_bandwidth_tbps=Decimal("5.3"))
PRECISIONS = st.sampled_from(["bf16", "fp8", "int8", "int4"])


@st.composite
def architectures(draw: st.DrawFn) -> Architecture:
    kv_heads = draw(st.sampled_from([1, 2, 4, 8, 16]))
    attention_heads = kv_heads * draw(st.integers(1, 16))
    parameters = draw(st.integers(10**6, 10**12))
    mla = draw(st.booleans())
    return Architecture(
        name="generated",
        parameters=parameters,
        active_parameters=draw(st.integers(1, parameters)),
        layers=draw(st.integers(1, 160)),
        attention_heads=attention_heads,
        kv_heads=kv_heads,
        head_dim=draw(st.sampled_from([64, 96, 128, 192, 256])),
        attention="mla" if mla else "gqa",
        kv_latent_dim=draw(st.integers(64, 1024)) if mla else None,
    )


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    return Workload(
        weight_precision=draw(PRECISIONS),
        kv_cache_precision=draw(PRECISIONS),
        context_tokens=draw(st.integers(1, 262_144)),
        concurrency=draw(st.integers(1, 512)),
        max_gpus_per_node=draw(st.sampled_from([1, 2, 4, 8, 16])),
    )


@settings(max_examples=200, deadline=None)
@given(architectures(), workloads())
def test_generated_architectures_pass_the_catalogue_rules_and_size_consistently(
    architecture, workload
):
    assert not llm_architecture_errors(
        parameters=architecture.parameters,
        active_parameters=architecture.active_parameters,
        layers=architecture.layers,
        attention_heads=architecture.attention_heads,
        kv_heads=architecture.kv_heads,
        head_dim=architecture.head_dim,
        attention=architecture.attention,
        kv_latent_dim=architecture.kv_latent_dim,
        max_context_tokens=None,
    )
    needed = demand(architecture, workload)
    # The KV cache is linear in context and concurrency; weights hold every parameter.
    assert needed.kv_cache_bytes == (
        needed.kv_cache_bytes_per_token * workload.context_tokens * workload.concurrency
    )
    assert needed.active_weight_bytes <= needed.weight_bytes
    answer = size(architecture, workload, [H100, MI300X])
    assert all(degree & (degree - 1) == 0 for degree in answer.degrees)
    for verdict in answer.verdicts:
        per_gpu = [placement.needed_bytes_per_gpu for placement in verdict.placements]
        # More GPUs never need more memory each: weights and cache only ever split further.
        assert per_gpu == sorted(per_gpu, reverse=True)
        fits = [placement.gpus for placement in verdict.placements if placement.fits]
        # Once a degree fits, every larger allowed degree fits too.
        assert fits == [p.gpus for p in verdict.placements][len(per_gpu) - len(fits) :]
        for placement in verdict.placements:
            assert placement.overhead_bytes_per_gpu >= 2 * GIB
            total_kv = placement.kv_cache_bytes_per_gpu * placement.gpus
            assert total_kv >= needed.kv_cache_bytes  # held once at least, never lost
            assert placement.decode_tokens_per_second_upper_bound >= 0
            assert verdict.why_not == "" or not verdict.fits


@settings(max_examples=100, deadline=None)
@given(architectures(), workloads(), st.integers(2, 8))
def test_kv_cache_grows_linearly_with_concurrency(architecture, workload, factor):
    more = Workload(
        weight_precision=workload.weight_precision,
        kv_cache_precision=workload.kv_cache_precision,
        context_tokens=workload.context_tokens,
        concurrency=workload.concurrency * factor,
    )
    assert demand(architecture, more).kv_cache_bytes == (
        demand(architecture, workload).kv_cache_bytes * factor
    )
