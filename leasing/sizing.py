"""Sizing: how much GPU memory a model and a workload need, and which GPUs per node hold them.

Pure arithmetic over plain inputs (no ORM), like billing.rating: the selector
(leasing.selectors.sizing) reads the catalogue and the offers and hands the figures in. Rules:

- Weights: parameters x bytes per parameter of the weight precision (bf16 2, fp8 1, int8 1,
  int4 0.5), rounded up to a whole byte. Every parameter is counted at that precision (real
  quantised checkpoints keep a few tensors wider; the difference is inside the overhead).
- KV cache, grouped-query (and multi-head) attention: 2 (a key and a value) x layers x KV heads
  x head dimension x bytes per number x tokens x concurrency, where tokens is the full context of
  every sequence (the worst case a server must hold).
- KV cache, multi-head latent attention (DeepSeek-V3): one latent of `kv_latent_dim` numbers per
  token and layer: layers x kv_latent_dim x bytes x tokens x concurrency. It is not split by heads,
  so every GPU of a tensor-parallel group holds all of it (as vLLM and SGLang store it).
- Tensor parallelism over t GPUs of one node: t is a power of two up to the node's GPU count that
  divides the attention heads; for grouped-query attention t also divides the KV heads or is a
  multiple of them (then each GPU holds one KV head, replicated t / KV heads times). Each GPU
  holds weights / t and its share of the KV cache.
- Overhead per GPU: 10 % of the GPU's memory (runtime, CUDA graphs, communication buffers,
  allocator fragmentation; vLLM's default gpu_memory_utilization is 0.9) plus a 2 GiB
  activation reserve. A GPU fits when weights + KV cache + overhead <= its memory. The catalog's
  memory_gb is read as GiB (2^30 bytes), as HBM is sized.
- Decode speed, an upper bound and never a forecast: one decoding step reads each GPU's share
  of the weights a token uses (the active parameters of a mixture of experts: the least a step can
  read) and the KV cache of every sequence at full context, and makes one token per sequence.
  tokens/s <= concurrency x memory bandwidth per GPU / bytes each GPU reads per step; with one
  sequence and no replication that is bandwidth x t / bytes read per token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal

from core.errors import FieldError
from core.text import counted, noun
from inventory.choices import PRECISION_BITS, AttentionKind
from inventory.rules import MAX_GPUS_PER_NODE

GIB = 2**30
RUNTIME_RESERVE_PERCENT = 10
ACTIVATION_RESERVE_BYTES = 2 * GIB
TERABYTE = 10**12
MAX_CONCURRENCY = 100_000
OVERHEAD_RULE = (
    f"Overhead per GPU: {RUNTIME_RESERVE_PERCENT} % of its memory (runtime, CUDA graphs, "
    "communication buffers, fragmentation) plus a 2 GiB activation reserve."
)


@dataclass(frozen=True)
class Architecture:
    """The figures of a model that sizing reads (from the catalogue or the request)."""

    name: str
    parameters: int
    active_parameters: int
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    attention: str = AttentionKind.GQA
    kv_latent_dim: int | None = None
    max_context_tokens: int | None = None


@dataclass(frozen=True)
class Workload:
    """What is served: precisions, context per sequence, sequences at once, node size."""

    weight_precision: str
    kv_cache_precision: str
    context_tokens: int
    concurrency: int
    max_gpus_per_node: int = 8


@dataclass(frozen=True)
class GpuSpec:
    """A GPU model's memory and bandwidth, from the GPU catalog."""

    slug: str
    name: str
    memory_gb: int
    memory_bandwidth_tbps: Decimal

    @property
    def memory_bytes(self) -> int:
        """The GPU's memory in bytes (memory_gb read as GiB)."""
        return self.memory_gb * GIB


@dataclass(frozen=True)
class Demand:
    """What the whole workload needs, before it is split over GPUs."""

    weight_bytes: int
    weight_explanation: str
    active_weight_bytes: int
    kv_cache_bytes_per_token: int
    kv_cache_bytes: int
    kv_cache_explanation: str


@dataclass(frozen=True)
class Placement:
    """The workload on `gpus` GPUs of one model in one node (tensor parallel), fitting or not."""

    gpu: GpuSpec
    gpus: int
    weight_bytes_per_gpu: int
    kv_cache_bytes_per_gpu: int
    overhead_bytes_per_gpu: int
    needed_bytes_per_gpu: int
    fits: bool
    memory_explanation: str
    decode_tokens_per_second_upper_bound: Decimal
    decode_tokens_per_second_per_sequence_upper_bound: Decimal
    decode_explanation: str

    @property
    def headroom_bytes_per_gpu(self) -> int:
        """Memory left on each GPU (negative: short by that much)."""
        return self.gpu.memory_bytes - self.needed_bytes_per_gpu


@dataclass(frozen=True)
class GpuVerdict:
    """One GPU model: the tensor-parallel degrees that fit, and why the others do not."""

    gpu: GpuSpec
    placements: list[Placement]
    reasons: list[str]

    @property
    def fits(self) -> list[Placement]:
        """The placements that fit, fewest GPUs first."""
        return [placement for placement in self.placements if placement.fits]

    @property
    def why_not(self) -> str:
        """Why no degree fits, in sentences (empty when one does)."""
        return "" if self.fits else " ".join(self.reasons)


# ---------------------------------------------------------------- words


def gib(size: int) -> str:
    """Bytes as GiB with two decimals: '14.96 GiB'."""
    shown = (Decimal(size) / GIB).quantize(Decimal("0.01"), rounding=ROUND_DOWN)
    return f"{shown:,} GiB"


def _bytes(size: int) -> str:
    return f"{gib(size)} ({size:,} bytes)"


def _per_number(bits: int) -> str:
    """Bytes per stored number: '2 bytes', '1 byte', '0.5 bytes'."""
    size = Decimal(bits) / 8
    return counted(size, "byte", shown=f"{size:f}")


def gpu_group(gpus: int, slug: str) -> str:
    """'1 h100-sxm GPU', '8 b200 GPUs'."""
    return f"{gpus} {slug} {noun(gpus, 'GPU')}"


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


# ---------------------------------------------------------------- rules


def workload_errors(architecture: Architecture, workload: Workload) -> list[FieldError]:
    """Rules of the workload: positive counts, a node size, a context the model supports."""
    errors: list[FieldError] = []
    if workload.context_tokens <= 0:
        errors.append(
            FieldError("context_tokens", "not_positive", "context_tokens must be at least 1.")
        )
    elif (
        architecture.max_context_tokens is not None
        and workload.context_tokens > architecture.max_context_tokens
    ):
        errors.append(
            FieldError(
                "context_tokens",
                "context_above_model_max",
                f"{architecture.name} supports at most {architecture.max_context_tokens:,} "
                f"tokens of context; {workload.context_tokens:,} were asked.",
            )
        )
    if workload.concurrency <= 0:
        errors.append(FieldError("concurrency", "not_positive", "concurrency must be at least 1."))
    elif workload.concurrency > MAX_CONCURRENCY:
        errors.append(
            FieldError(
                "concurrency",
                "concurrency_too_high",
                f"concurrency is at most {MAX_CONCURRENCY:,} sequences per replica.",
            )
        )
    if not 1 <= workload.max_gpus_per_node <= MAX_GPUS_PER_NODE:
        errors.append(
            FieldError(
                "max_gpus_per_node",
                "invalid_node_size",
                f"max_gpus_per_node is between 1 and {MAX_GPUS_PER_NODE}.",
            )
        )
    return errors


# ---------------------------------------------------------------- demand


def demand(architecture: Architecture, workload: Workload) -> Demand:
    """Weight bytes and KV-cache bytes of the whole workload, each with its sentence."""
    weight_bits = PRECISION_BITS[workload.weight_precision]  # type: ignore[index]
    kv_bits = PRECISION_BITS[workload.kv_cache_precision]  # type: ignore[index]
    weight_bytes = _ceil_div(architecture.parameters * weight_bits, 8)
    active_bytes = _ceil_div(architecture.active_parameters * weight_bits, 8)
    weight_explanation = (
        f"Weights: {architecture.parameters:,} parameters x {_per_number(weight_bits)} "
        f"({workload.weight_precision}) = {_bytes(weight_bytes)}."
    )
    if architecture.active_parameters != architecture.parameters:
        weight_explanation += (
            f" Every expert is held in memory; a token reads "
            f"{architecture.active_parameters:,} active parameters = {_bytes(active_bytes)}."
        )
    kv_size = _per_number(kv_bits)
    sequences = counted(workload.concurrency, "sequence")
    tokens = f"{workload.context_tokens:,} tokens"
    if architecture.attention == AttentionKind.MLA:
        latent = architecture.kv_latent_dim or 0
        per_token = _ceil_div(architecture.layers * latent * kv_bits, 8)
        formula = (
            f"{counted(architecture.layers, 'layer')} x a latent of {latent} numbers x "
            f"{kv_size} ({workload.kv_cache_precision}) = {per_token:,} bytes per token "
            "(multi-head latent attention: one compressed vector per token and layer, no key "
            "and value per head)"
        )
    else:
        per_token = _ceil_div(
            2 * architecture.layers * architecture.kv_heads * architecture.head_dim * kv_bits, 8
        )
        formula = (
            f"2 (key and value) x {counted(architecture.layers, 'layer')} x "
            f"{counted(architecture.kv_heads, 'KV head')} x head dimension "
            f"{architecture.head_dim} x {kv_size} ({workload.kv_cache_precision}) = "
            f"{per_token:,} bytes per token"
        )
    kv_bytes = per_token * workload.context_tokens * workload.concurrency
    return Demand(
        weight_bytes=weight_bytes,
        weight_explanation=weight_explanation,
        active_weight_bytes=active_bytes,
        kv_cache_bytes_per_token=per_token,
        kv_cache_bytes=kv_bytes,
        kv_cache_explanation=(
            f"KV cache: {formula}; x {tokens} of context x {sequences} at once = "
            f"{_bytes(kv_bytes)}."
        ),
    )


# ---------------------------------------------------------------- tensor parallelism


def tensor_parallel_degrees(
    architecture: Architecture, max_gpus_per_node: int
) -> tuple[list[int], list[str]]:
    """Powers of two up to the node size that split the heads evenly, and why others do not."""
    degrees: list[int] = []
    skipped: list[str] = []
    degree = 1
    while degree <= max_gpus_per_node:
        if architecture.attention_heads % degree:
            skipped.append(
                f"{degree} GPUs do not divide the {architecture.attention_heads} attention heads."
            )
        elif (
            architecture.attention != AttentionKind.MLA
            and architecture.kv_heads % degree
            and degree % architecture.kv_heads
        ):
            skipped.append(
                f"{degree} GPUs neither divide the {architecture.kv_heads} KV heads nor are a "
                "multiple of them."
            )
        else:
            degrees.append(degree)
        degree *= 2
    return degrees, skipped


def _kv_share(architecture: Architecture, demand_: Demand, gpus: int) -> tuple[int, str]:
    """The KV-cache bytes one GPU of `gpus` holds, and how it was split."""
    total = demand_.kv_cache_bytes
    if architecture.attention == AttentionKind.MLA:
        return total, "all of it: MLA's latent is not split by heads"
    if gpus == 1:
        return total, "the whole KV cache"
    if gpus <= architecture.kv_heads:
        heads = architecture.kv_heads // gpus
        return _ceil_div(total, gpus), (
            f"{counted(heads, 'KV head')} of {architecture.kv_heads} = 1/{gpus} of the KV cache"
        )
    copies = gpus // architecture.kv_heads
    return _ceil_div(total, architecture.kv_heads), (
        f"1 KV head of {architecture.kv_heads} (each held by {counted(copies, 'GPU')}) = "
        f"1/{architecture.kv_heads} of the KV cache"
    )


def placement(
    architecture: Architecture, workload: Workload, demand_: Demand, gpu: GpuSpec, gpus: int
) -> Placement:
    """The workload on `gpus` GPUs of `gpu` in one node: memory per GPU, fit, decode bound."""
    weights = _ceil_div(demand_.weight_bytes, gpus)
    kv, kv_how = _kv_share(architecture, demand_, gpus)
    overhead = _ceil_div(gpu.memory_bytes * RUNTIME_RESERVE_PERCENT, 100) + (
        ACTIVATION_RESERVE_BYTES
    )
    needed = weights + kv + overhead
    fits = needed <= gpu.memory_bytes
    group = gpu_group(gpus, gpu.slug)
    verdict = (
        f"fits with {gib(gpu.memory_bytes - needed)} to spare"
        if fits
        else f"does not fit: {gib(needed - gpu.memory_bytes)} short"
    )
    memory_explanation = (
        f"On {group} each GPU holds weights {gib(weights)} (1/{gpus}) + KV cache {gib(kv)} "
        f"({kv_how}) + overhead {gib(overhead)} ({RUNTIME_RESERVE_PERCENT} % of "
        f"{gpu.memory_gb} GiB + 2 GiB) = {gib(needed)} of {gpu.memory_gb} GiB: {verdict}."
    )
    read_weights = _ceil_div(demand_.active_weight_bytes, gpus)
    step_bytes = read_weights + kv
    bandwidth = gpu.memory_bandwidth_tbps * TERABYTE
    bound = (workload.concurrency * bandwidth / step_bytes).quantize(
        Decimal("0.1"), rounding=ROUND_DOWN
    )
    per_sequence = (bound / workload.concurrency).quantize(Decimal("0.1"), rounding=ROUND_DOWN)
    weights_read = (
        "the active weights"
        if demand_.active_weight_bytes != demand_.weight_bytes
        else "the weights"
    )
    decode_explanation = (
        f"Upper bound, not a forecast: each decoding step reads {gib(read_weights)} of "
        f"{weights_read} and {gib(kv)} of KV cache on every GPU ({step_bytes:,} bytes) and "
        f"makes one token for each of {counted(workload.concurrency, 'sequence')}; at "
        f"{gpu.memory_bandwidth_tbps:f} TB/s per GPU that is at most "
        f"{workload.concurrency:,} x {int(bandwidth):,} bytes/s / {step_bytes:,} = {bound:,} "
        f"tokens/s for the replica ({per_sequence:,} per sequence). Compute, kernels and "
        "scheduling keep real serving below it."
    )
    return Placement(
        gpu=gpu,
        gpus=gpus,
        weight_bytes_per_gpu=weights,
        kv_cache_bytes_per_gpu=kv,
        overhead_bytes_per_gpu=overhead,
        needed_bytes_per_gpu=needed,
        fits=fits,
        memory_explanation=memory_explanation,
        decode_tokens_per_second_upper_bound=bound,
        decode_tokens_per_second_per_sequence_upper_bound=per_sequence,
        decode_explanation=decode_explanation,
    )


@dataclass(frozen=True)
class Sizing:
    """The workload's demand, the degrees tried (and why others were not), each GPU's verdict."""

    demand: Demand
    degrees: list[int]
    skipped_degrees: list[str]
    verdicts: list[GpuVerdict]


def size(architecture: Architecture, workload: Workload, gpus: Sequence[GpuSpec]) -> Sizing:
    """The workload's demand, and for each GPU model every allowed degree, fitting or not."""
    needed = demand(architecture, workload)
    degrees, skipped = tensor_parallel_degrees(architecture, workload.max_gpus_per_node)
    verdicts = []
    for gpu in gpus:
        placements = [placement(architecture, workload, needed, gpu, t) for t in degrees]
        if placements:
            largest = placements[-1]
            reason = (
                f"{gpu.slug}: even on {counted(largest.gpus, 'GPU')} of one node each GPU "
                f"needs {gib(largest.needed_bytes_per_gpu)} of its {gpu.memory_gb} GiB."
            )
        else:
            reason = f"{gpu.slug}: no tensor-parallel degree splits the heads evenly."
        verdicts.append(GpuVerdict(gpu=gpu, placements=placements, reasons=[reason]))
    return Sizing(demand=needed, degrees=degrees, skipped_degrees=skipped, verdicts=verdicts)
