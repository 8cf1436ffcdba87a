"""The GPU catalog: public vendor figures per GPU, each with its source.

Conventions, so the figures compare across vendors:
- TFLOPS are dense (no 2:4 sparsity). Datasheets that quote sparse peaks are halved, and the
  source says so. GeForce cards are quoted with FP32 accumulate (their FP16-accumulate rate is
  twice that), because BF16 training accumulates in FP32.
- Multi-GPU system figures (HGX B200, GB200 NVL72) are divided by the number of GPUs.
- Dates: release_date is the announcement; ga_date is when customers could first get it. Where
  the vendor named only a quarter or month, the first day of it is used and the source says so.
- Huawei publishes no per-chip datasheet for the Ascend 910B; its figures are third-party
  estimates and marked as such.
"""

from decimal import Decimal

from django.db import migrations

A100_SHEET = (
    "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf),"
    " A100 80GB SXM column"
)
H100_SHEET = (
    "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100), H100 SXM column"
)
H200_SHEET = "NVIDIA H200 Tensor Core GPU product page / datasheet (nvidia.com/en-us/data-center/h200), H200 SXM column"
HGX_SHEET = "NVIDIA HGX platform page (nvidia.com/en-us/data-center/hgx), HGX B200 column (8 GPUs)"
NVL72_SHEET = "NVIDIA GB200 NVL72 product page (nvidia.com/en-us/data-center/gb200-nvl72), per rack of 72 GPUs"
BLACKWELL_BRIEF = "NVIDIA Blackwell Architecture Technical Brief (2024)"
ADA_PAPER = "NVIDIA Ada Lovelace GPU Architecture whitepaper, Appendix A, GeForce RTX 4090 column"
RTX_BW_PAPER = (
    "NVIDIA RTX Blackwell GPU Architecture whitepaper (2025), Appendix, GeForce RTX 5090 column"
)
PRO6000_SHEET = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet (2025)"
MI300X_SHEET = "AMD Instinct MI300X accelerator data sheet / product page (amd.com/en/products/accelerators/instinct/mi300/mi300x.html)"
ASCEND_ESTIMATE = (
    "Third-party estimate (analyst and press compilations, 2023-2024); Huawei publishes no"
    " per-chip Ascend 910B datasheet — approximate"
)

# Each figure is (value, source). Missing figures (no FP8, PCIe-only link) are None.
CATALOG = [
    {
        "slug": "a100-80gb-sxm",
        "name": "NVIDIA A100 80GB SXM",
        "vendor": "nvidia",
        "generation": "Ampere",
        "form_factor": "sxm",
        "memory_type": "HBM2e",
        "interconnect": "NVLink 3",
        "successor": "h100-sxm",
        "figures": {
            "release_date": (
                "2020-11-16",
                "NVIDIA press release 'NVIDIA Doubles Down: Announces A100 80GB GPU', 2020-11-16 (SC20)",
            ),
            "ga_date": (
                "2021-01-01",
                "Same press release: partner HGX A100 80GB systems expected in the first half of 2021; first day of that period",
            ),
            "memory_gb": (80, A100_SHEET),
            "memory_bandwidth_tbps": ("2.039", A100_SHEET + ": 2,039 GB/s"),
            "dense_bf16_tflops": (
                "312.0",
                A100_SHEET + ": BF16 Tensor Core 312 TFLOPS (624 with sparsity)",
            ),
            "dense_fp8_tflops": (None, "Ampere tensor cores have no FP8"),
            "tdp_watts": (400, A100_SHEET + ": max TDP 400 W"),
            "interconnect_bandwidth_gbyte_s": (600, A100_SHEET + ": NVLink 600 GB/s"),
        },
    },
    {
        "slug": "h100-sxm",
        "name": "NVIDIA H100 SXM",
        "vendor": "nvidia",
        "generation": "Hopper",
        "form_factor": "sxm",
        "memory_type": "HBM3",
        "interconnect": "NVLink 4",
        "successor": "h200-sxm",
        "figures": {
            "release_date": (
                "2022-03-22",
                "NVIDIA GTC 2022 press release 'NVIDIA Announces Hopper Architecture', 2022-03-22",
            ),
            "ga_date": (
                "2022-10-01",
                "NVIDIA press release 'NVIDIA Hopper in Full Production', 2022-09-20: partner systems shipping from October 2022; first day of that month",
            ),
            "memory_gb": (80, H100_SHEET),
            "memory_bandwidth_tbps": ("3.350", H100_SHEET + ": 3.35 TB/s"),
            "dense_bf16_tflops": (
                "989.5",
                H100_SHEET + ": BF16 1,979 TFLOPS with sparsity, halved for dense",
            ),
            "dense_fp8_tflops": (
                "1979.0",
                H100_SHEET + ": FP8 3,958 TFLOPS with sparsity, halved for dense",
            ),
            "tdp_watts": (700, H100_SHEET + ": max TDP up to 700 W (configurable)"),
            "interconnect_bandwidth_gbyte_s": (900, H100_SHEET + ": NVLink 900 GB/s"),
        },
    },
    {
        "slug": "h200-sxm",
        "name": "NVIDIA H200 SXM",
        "vendor": "nvidia",
        "generation": "Hopper",
        "form_factor": "sxm",
        "memory_type": "HBM3e",
        "interconnect": "NVLink 4",
        "successor": "b200",
        "figures": {
            "release_date": (
                "2023-11-13",
                "NVIDIA press release 'NVIDIA Supercharges Hopper, the World's Leading AI Computing Platform', 2023-11-13 (SC23)",
            ),
            "ga_date": (
                "2024-04-01",
                "Same press release: available from system makers and cloud providers starting in Q2 2024; first day of that quarter",
            ),
            "memory_gb": (141, H200_SHEET),
            "memory_bandwidth_tbps": ("4.800", H200_SHEET + ": 4.8 TB/s"),
            "dense_bf16_tflops": (
                "989.5",
                H200_SHEET + ": BF16 1,979 TFLOPS with sparsity, halved for dense",
            ),
            "dense_fp8_tflops": (
                "1979.0",
                H200_SHEET + ": FP8 3,958 TFLOPS with sparsity, halved for dense",
            ),
            "tdp_watts": (700, H200_SHEET + ": max TDP up to 700 W (configurable)"),
            "interconnect_bandwidth_gbyte_s": (900, H200_SHEET + ": NVLink 900 GB/s"),
        },
    },
    {
        "slug": "b200",
        "name": "NVIDIA B200 (HGX)",
        "vendor": "nvidia",
        "generation": "Blackwell",
        "form_factor": "sxm",
        "memory_type": "HBM3e",
        "interconnect": "NVLink 5",
        "successor": None,
        "figures": {
            "release_date": (
                "2024-03-18",
                "NVIDIA GTC 2024 press release 'NVIDIA Blackwell Platform Arrives to Power a New Era of Computing', 2024-03-18",
            ),
            "ga_date": (
                "2024-12-01",
                "NVIDIA Q3 FY2025 results, 2024-11-20: Blackwell in full production, customer shipments in fiscal Q4 (Nov 2024 - Jan 2025); month precision",
            ),
            "memory_gb": (
                180,
                HGX_SHEET + ": 1.4 TB HBM3e per 8 GPUs (DGX B200: 1,440 GB) = 180 GB per GPU",
            ),
            "memory_bandwidth_tbps": ("8.000", HGX_SHEET + ": 64 TB/s per 8 GPUs = 8 TB/s per GPU"),
            "dense_bf16_tflops": (
                "2250.0",
                HGX_SHEET
                + ": FP16/BF16 36 PFLOPS with sparsity per 8 GPUs, halved for dense = 2,250 TFLOPS per GPU",
            ),
            "dense_fp8_tflops": (
                "4500.0",
                HGX_SHEET
                + ": FP8 72 PFLOPS with sparsity per 8 GPUs, halved for dense = 4,500 TFLOPS per GPU",
            ),
            "tdp_watts": (1000, BLACKWELL_BRIEF + ": HGX B200 GPU configured at 1,000 W"),
            "interconnect_bandwidth_gbyte_s": (1800, HGX_SHEET + ": NVLink 5, 1.8 TB/s per GPU"),
        },
    },
    {
        "slug": "gb200",
        "name": "NVIDIA GB200 (per GPU)",
        "vendor": "nvidia",
        "generation": "Blackwell",
        "form_factor": "superchip",
        "memory_type": "HBM3e",
        "interconnect": "NVLink 5",
        "successor": None,
        "figures": {
            "release_date": (
                "2024-03-18",
                "NVIDIA GTC 2024 press release 'NVIDIA Blackwell Platform Arrives to Power a New Era of Computing', 2024-03-18",
            ),
            "ga_date": (
                "2025-02-04",
                "CoreWeave press release 2025-02-04: first cloud provider with generally available GB200 NVL72 instances",
            ),
            "memory_gb": (186, NVL72_SHEET + ": up to 13.4 TB HBM3e / 72 GPUs = 186 GB per GPU"),
            "memory_bandwidth_tbps": (
                "8.000",
                NVL72_SHEET + ": 576 TB/s / 72 GPUs = 8 TB/s per GPU",
            ),
            "dense_bf16_tflops": (
                "2500.0",
                NVL72_SHEET
                + ": FP16/BF16 360 PFLOPS with sparsity / 72 GPUs, halved for dense = 2,500 TFLOPS",
            ),
            "dense_fp8_tflops": (
                "5000.0",
                NVL72_SHEET
                + ": FP8 720 PFLOPS with sparsity / 72 GPUs, halved for dense = 5,000 TFLOPS",
            ),
            "tdp_watts": (
                1200,
                BLACKWELL_BRIEF + ": GB200 GPU configured at 1,200 W (the Grace CPU is extra)",
            ),
            "interconnect_bandwidth_gbyte_s": (
                1800,
                NVL72_SHEET + ": NVLink 5, 130 TB/s / 72 GPUs = 1.8 TB/s per GPU",
            ),
        },
    },
    {
        "slug": "rtx-4090",
        "name": "NVIDIA GeForce RTX 4090",
        "vendor": "nvidia",
        "generation": "Ada Lovelace",
        "form_factor": "pcie",
        "memory_type": "GDDR6X",
        "interconnect": "PCIe 4.0 x16 (no NVLink)",
        "successor": "rtx-5090",
        "figures": {
            "release_date": (
                "2022-09-20",
                "NVIDIA GTC keynote / GeForce news 'NVIDIA Delivers Quantum Leap in Performance, Introduces New Era of Neural Rendering With GeForce RTX 40 Series', 2022-09-20",
            ),
            "ga_date": ("2022-10-12", "Same announcement: RTX 4090 on sale from 2022-10-12"),
            "memory_gb": (24, ADA_PAPER),
            "memory_bandwidth_tbps": ("1.008", ADA_PAPER + ": 1,008 GB/s"),
            "dense_bf16_tflops": (
                "165.2",
                ADA_PAPER
                + ": peak BF16 tensor TFLOPS with FP32 accumulate 165.2 (330.4 with sparsity)",
            ),
            "dense_fp8_tflops": (
                "330.3",
                ADA_PAPER
                + ": peak FP8 tensor TFLOPS with FP32 accumulate 330.3 (660.6 with FP16 accumulate)",
            ),
            "tdp_watts": (450, ADA_PAPER + ": total graphics power 450 W"),
            "interconnect_bandwidth_gbyte_s": (None, "No NVLink on GeForce RTX 40 series"),
        },
    },
    {
        "slug": "rtx-5090",
        "name": "NVIDIA GeForce RTX 5090",
        "vendor": "nvidia",
        "generation": "Blackwell",
        "form_factor": "pcie",
        "memory_type": "GDDR7",
        "interconnect": "PCIe 5.0 x16 (no NVLink)",
        "successor": None,
        "figures": {
            "release_date": (
                "2025-01-06",
                "NVIDIA CES 2025 keynote / press release 'NVIDIA Blackwell GeForce RTX 50 Series Opens New World of AI Computer Graphics', 2025-01-06",
            ),
            "ga_date": ("2025-01-30", "Same press release: RTX 5090 available from 2025-01-30"),
            "memory_gb": (32, RTX_BW_PAPER),
            "memory_bandwidth_tbps": ("1.792", RTX_BW_PAPER + ": 1,792 GB/s"),
            "dense_bf16_tflops": (
                "209.5",
                RTX_BW_PAPER
                + ": peak BF16 tensor TFLOPS with FP32 accumulate 209.5 (419 with sparsity)",
            ),
            "dense_fp8_tflops": (
                "419.0",
                RTX_BW_PAPER
                + ": peak FP8 tensor TFLOPS with FP32 accumulate 419 (838 with sparsity)",
            ),
            "tdp_watts": (575, RTX_BW_PAPER + ": total graphics power 575 W"),
            "interconnect_bandwidth_gbyte_s": (None, "No NVLink on GeForce RTX 50 series"),
        },
    },
    {
        "slug": "rtx-pro-6000-blackwell",
        "name": "NVIDIA RTX PRO 6000 Blackwell",
        "vendor": "nvidia",
        "generation": "Blackwell",
        "form_factor": "pcie",
        "memory_type": "GDDR7",
        "interconnect": "PCIe 5.0 x16 (no NVLink)",
        "successor": None,
        "figures": {
            "release_date": (
                "2025-03-18",
                "NVIDIA GTC 2025 press release 'NVIDIA Blackwell RTX PRO Comes to Workstations and Servers', 2025-03-18",
            ),
            "ga_date": (
                "2025-04-01",
                "Same press release: available through distribution partners (PNY, TD SYNNEX) starting in April 2025; first day of that month",
            ),
            "memory_gb": (96, PRO6000_SHEET + ": 96 GB GDDR7 with ECC"),
            "memory_bandwidth_tbps": ("1.792", PRO6000_SHEET + ": 1,792 GB/s"),
            "dense_bf16_tflops": (
                "500.0",
                "Derived from "
                + PRO6000_SHEET
                + ": 4,000 AI TOPS is FP4 with sparsity; halved for dense (FP4 2,000), halved per precision doubling (FP8 1,000, BF16 500); NVIDIA prints no BF16 figure",
            ),
            "dense_fp8_tflops": (
                "1000.0",
                "Derived from "
                + PRO6000_SHEET
                + ": 4,000 AI TOPS FP4 with sparsity, halved for dense, halved for FP8",
            ),
            "tdp_watts": (600, PRO6000_SHEET + ": max power 600 W"),
            "interconnect_bandwidth_gbyte_s": (None, "No NVLink on RTX PRO 6000 Blackwell"),
        },
    },
    {
        "slug": "mi300x",
        "name": "AMD Instinct MI300X",
        "vendor": "amd",
        "generation": "CDNA 3",
        "form_factor": "oam",
        "memory_type": "HBM3",
        "interconnect": "Infinity Fabric",
        "successor": None,
        "figures": {
            "release_date": (
                "2023-12-06",
                "AMD press release 'AMD Delivers Leadership Portfolio of Data Center AI Solutions with AMD Instinct MI300 Series', 2023-12-06 (Advancing AI)",
            ),
            "ga_date": (
                "2023-12-06",
                "Same press release: MI300X shipping at launch to OEMs and cloud partners",
            ),
            "memory_gb": (192, MI300X_SHEET),
            "memory_bandwidth_tbps": ("5.300", MI300X_SHEET + ": 5.3 TB/s peak"),
            "dense_bf16_tflops": (
                "1307.4",
                MI300X_SHEET + ": peak BF16 1,307.4 TFLOPS dense (2,614.9 with sparsity)",
            ),
            "dense_fp8_tflops": (
                "2614.9",
                MI300X_SHEET + ": peak FP8 2,614.9 TFLOPS dense (5,229.8 with sparsity)",
            ),
            "tdp_watts": (750, MI300X_SHEET + ": 750 W peak board power"),
            "interconnect_bandwidth_gbyte_s": (
                896,
                MI300X_SHEET + ": 7 Infinity Fabric links x 128 GB/s = 896 GB/s peak aggregate",
            ),
        },
    },
    {
        "slug": "ascend-910b",
        "name": "Huawei Ascend 910B",
        "vendor": "huawei",
        "generation": "Da Vinci",
        "form_factor": "mezzanine",
        "memory_type": "HBM2e",
        "interconnect": "HCCS",
        "successor": None,
        "figures": {
            "release_date": (None, "No public announcement date for the 910B variant"),
            "ga_date": (
                "2023-07-01",
                ASCEND_ESTIMATE
                + ": volume shipments reported from the second half of 2023; first day of that period",
            ),
            "memory_gb": (64, ASCEND_ESTIMATE + ": 64 GB HBM2e"),
            "memory_bandwidth_tbps": ("1.600", ASCEND_ESTIMATE + ": about 1.6 TB/s"),
            "dense_bf16_tflops": (
                "320.0",
                ASCEND_ESTIMATE + ": about 320 TFLOPS FP16; BF16 assumed at the FP16 rate",
            ),
            "dense_fp8_tflops": (None, "The 910B has no FP8 support"),
            "tdp_watts": (400, ASCEND_ESTIMATE + ": about 400 W per module"),
            "interconnect_bandwidth_gbyte_s": (
                None,
                "HCCS bandwidth per 910B is not published by Huawei",
            ),
        },
    },
]


def _value(field, raw):
    if raw is None:
        return None
    if field in {"memory_bandwidth_tbps", "dense_bf16_tflops", "dense_fp8_tflops"}:
        return Decimal(raw)
    if field in {"release_date", "ga_date"}:
        from datetime import date

        return date.fromisoformat(raw)
    return raw


def load_catalog(apps, schema_editor):
    GpuModel = apps.get_model("inventory", "GpuModel")
    by_slug = {}
    for entry in CATALOG:
        fields = {name: _value(name, value) for name, (value, _) in entry["figures"].items()}
        sources = {name: source for name, (_, source) in entry["figures"].items()}
        by_slug[entry["slug"]], _ = GpuModel.objects.update_or_create(
            slug=entry["slug"],
            defaults={
                "name": entry["name"],
                "vendor": entry["vendor"],
                "generation": entry["generation"],
                "form_factor": entry["form_factor"],
                "memory_type": entry["memory_type"],
                "interconnect": entry["interconnect"],
                "spec_sources": sources,
                **fields,
            },
        )
    # Successors point forward, so link them once every model exists.
    for entry in CATALOG:
        if entry["successor"]:
            model = by_slug[entry["slug"]]
            model.successor = by_slug[entry["successor"]]
            model.save(update_fields=["successor"])


def unload_catalog(apps, schema_editor):
    GpuModel = apps.get_model("inventory", "GpuModel")
    slugs = [entry["slug"] for entry in CATALOG]
    GpuModel.objects.filter(slug__in=slugs).update(successor=None)
    GpuModel.objects.filter(slug__in=slugs).delete()


class Migration(migrations.Migration):
    dependencies = [("inventory", "0001_initial")]

    operations = [migrations.RunPython(load_catalog, unload_catalog)]
