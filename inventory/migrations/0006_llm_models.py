"""The model catalogue: open language models and the architecture figures sizing reads.

Conventions, so the figures compare across models:
- Architecture figures (layers, heads, KV heads, head dimension, precision) are read from each
  model's config.json on Hugging Face; every figure names its source in spec_sources.
- parameters is the count the weights hold (Hugging Face's safetensors count, or the model
  card's where the card gives the figure the weights are sized by); active_parameters is what one
  token reads (equal to parameters for dense models; the card's figure for a mixture of experts).
- max_context_tokens is the longest context the publisher supports on the model card (Qwen2.5
  reaches it with YaRN rope scaling; its config.json ships 32,768).
- DeepSeek-V3 uses multi-head latent attention (MLA): its KV cache holds one latent vector of
  kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576 numbers per token and layer (kv_latent_dim),
  not a key and a value per KV head; its head_dim is the query/key head (128 + 64 = 192).
"""

import django.db.models.deletion
import django.db.models.functions.math
import django.db.models.lookups
import simple_history.models
from django.conf import settings
from django.db import migrations, models

HF = "https://huggingface.co/"


def _config(repo: str) -> str:
    return f"{HF}{repo}/blob/main/config.json"


def _llama(size, params, layers, heads, hidden):
    repo = f"meta-llama/Llama-3.1-{size}-Instruct"
    config = f"{_config(repo)}"
    return {
        "slug": f"llama-3-1-{size.lower()}",
        "name": f"Llama 3.1 {size}",
        "publisher": "Meta",
        "source_url": config,
        "figures": {
            "parameters": (params, f"{HF}{repo}: safetensors parameter count {params:,}"),
            "active_parameters": (params, "Dense model: every parameter is read for each token"),
            "experts": (None, "Dense model"),
            "experts_per_token": (None, "Dense model"),
            "layers": (layers, f"{config}: num_hidden_layers {layers}"),
            "attention_heads": (heads, f"{config}: num_attention_heads {heads}"),
            "kv_heads": (8, f"{config}: num_key_value_heads 8 (grouped-query attention)"),
            "head_dim": (128, f"{config}: hidden_size {hidden:,} / {heads} heads = 128"),
            "attention": ("gqa", f"{config}: LlamaForCausalLM, grouped-query attention"),
            "kv_latent_dim": (None, "Not MLA"),
            "default_precision": ("bf16", f"{config}: torch_dtype bfloat16"),
            "max_context_tokens": (131072, f"{config}: max_position_embeddings 131072 (128K)"),
        },
    }


def _qwen(size, params, layers, heads, kv_heads, hidden, shown):
    repo = f"Qwen/Qwen2.5-{size}-Instruct"
    config = _config(repo)
    return {
        "slug": f"qwen2-5-{size.lower()}",
        "name": f"Qwen2.5 {size}",
        "publisher": "Qwen (Alibaba)",
        "source_url": config,
        "figures": {
            "parameters": (
                params,
                f"{HF}{repo}: safetensors parameter count {params:,} (model card: {shown})",
            ),
            "active_parameters": (params, "Dense model: every parameter is read for each token"),
            "experts": (None, "Dense model"),
            "experts_per_token": (None, "Dense model"),
            "layers": (layers, f"{config}: num_hidden_layers {layers}"),
            "attention_heads": (heads, f"{config}: num_attention_heads {heads}"),
            "kv_heads": (kv_heads, f"{config}: num_key_value_heads {kv_heads} (grouped-query)"),
            "head_dim": (128, f"{config}: hidden_size {hidden:,} / {heads} heads = 128"),
            "attention": ("gqa", f"{config}: Qwen2ForCausalLM, grouped-query attention"),
            "kv_latent_dim": (None, "Not MLA"),
            "default_precision": ("bf16", f"{config}: torch_dtype bfloat16"),
            "max_context_tokens": (
                131072,
                f"{HF}{repo} model card: full context 131,072 tokens with YaRN rope scaling "
                "(config.json ships max_position_embeddings 32768)",
            ),
        },
    }


DEEPSEEK_CONFIG = _config("deepseek-ai/DeepSeek-V3")
DEEPSEEK_CARD = f"{HF}deepseek-ai/DeepSeek-V3 model card"
MISTRAL_CONFIG = _config("mistralai/Mistral-7B-Instruct-v0.3")
MIXTRAL_CONFIG = _config("mistralai/Mixtral-8x7B-Instruct-v0.1")
MIXTRAL_BLOG = "Mistral AI, 'Mixtral of experts', 2023-12-11 (mistral.ai/news/mixtral-of-experts)"

# Each figure is (value, source); figures a model does not have are None.
CATALOGUE = [
    _llama("8B", 8_030_261_248, 32, 32, 4096),
    _llama("70B", 70_553_706_496, 80, 64, 8192),
    _llama("405B", 405_853_388_800, 126, 128, 16384),
    _qwen("7B", 7_615_616_512, 28, 28, 4, 3584, "7.61B"),
    _qwen("72B", 72_706_203_648, 80, 64, 8, 8192, "72.7B"),
    {
        "slug": "deepseek-v3",
        "name": "DeepSeek-V3",
        "publisher": "DeepSeek",
        "source_url": DEEPSEEK_CONFIG,
        "figures": {
            "parameters": (
                671_000_000_000,
                DEEPSEEK_CARD + ": 671B total parameters (the 685B on Hugging Face adds the 14B"
                " multi-token-prediction module, which serving without speculation does not load)",
            ),
            "active_parameters": (
                37_000_000_000,
                DEEPSEEK_CARD + ": 37B activated for each token",
            ),
            "experts": (256, DEEPSEEK_CONFIG + ": n_routed_experts 256 (plus 1 shared expert)"),
            "experts_per_token": (8, DEEPSEEK_CONFIG + ": num_experts_per_tok 8"),
            "layers": (61, DEEPSEEK_CONFIG + ": num_hidden_layers 61"),
            "attention_heads": (128, DEEPSEEK_CONFIG + ": num_attention_heads 128"),
            "kv_heads": (
                128,
                DEEPSEEK_CONFIG + ": num_key_value_heads 128 (MLA: the cache holds a latent instead)",
            ),
            "head_dim": (
                192,
                DEEPSEEK_CONFIG + ": qk_nope_head_dim 128 + qk_rope_head_dim 64 (v_head_dim 128)",
            ),
            "attention": ("mla", DEEPSEEK_CONFIG + ": kv_lora_rank 512, multi-head latent attention"),
            "kv_latent_dim": (
                576,
                DEEPSEEK_CONFIG + ": kv_lora_rank 512 + qk_rope_head_dim 64 = 576 per token and layer",
            ),
            "default_precision": (
                "fp8",
                DEEPSEEK_CONFIG + ": quantization_config fp8 e4m3 with 128x128 weight blocks",
            ),
            "max_context_tokens": (
                131072,
                DEEPSEEK_CARD + ": context length 128K (config max_position_embeddings 163840)",
            ),
        },
    },
    {
        "slug": "mistral-7b-v0-3",
        "name": "Mistral 7B v0.3",
        "publisher": "Mistral AI",
        "source_url": MISTRAL_CONFIG,
        "figures": {
            "parameters": (
                7_248_023_552,
                f"{HF}mistralai/Mistral-7B-Instruct-v0.3: safetensors parameter count 7,248,023,552",
            ),
            "active_parameters": (7_248_023_552, "Dense model: every parameter is read for each token"),
            "experts": (None, "Dense model"),
            "experts_per_token": (None, "Dense model"),
            "layers": (32, MISTRAL_CONFIG + ": num_hidden_layers 32"),
            "attention_heads": (32, MISTRAL_CONFIG + ": num_attention_heads 32"),
            "kv_heads": (8, MISTRAL_CONFIG + ": num_key_value_heads 8 (grouped-query)"),
            "head_dim": (128, MISTRAL_CONFIG + ": head_dim 128 (hidden_size 4,096 / 32 heads)"),
            "attention": ("gqa", MISTRAL_CONFIG + ": MistralForCausalLM, grouped-query attention"),
            "kv_latent_dim": (None, "Not MLA"),
            "default_precision": ("bf16", MISTRAL_CONFIG + ": torch_dtype bfloat16"),
            "max_context_tokens": (32768, MISTRAL_CONFIG + ": max_position_embeddings 32768"),
        },
    },
    {
        "slug": "mixtral-8x7b",
        "name": "Mixtral 8x7B",
        "publisher": "Mistral AI",
        "source_url": MIXTRAL_CONFIG,
        "figures": {
            "parameters": (
                46_702_792_704,
                f"{HF}mistralai/Mixtral-8x7B-Instruct-v0.1: safetensors parameter count"
                " 46,702,792,704 (" + MIXTRAL_BLOG + ": 46.7B total)",
            ),
            "active_parameters": (
                12_879_925_248,
                "Derived from " + MIXTRAL_CONFIG + ": per layer attention 41,943,040 + 2 of 8"
                " experts (2 x 3 x 14,336 x 4,096 = 352,321,536) + router 32,768 + norms 8,192,"
                " x 32 layers, + embeddings and output head 2 x 32,000 x 4,096 + final norm"
                " 4,096 = 12,879,925,248 (" + MIXTRAL_BLOG + ": 12.9B per token)",
            ),
            "experts": (8, MIXTRAL_CONFIG + ": num_local_experts 8"),
            "experts_per_token": (2, MIXTRAL_CONFIG + ": num_experts_per_tok 2"),
            "layers": (32, MIXTRAL_CONFIG + ": num_hidden_layers 32"),
            "attention_heads": (32, MIXTRAL_CONFIG + ": num_attention_heads 32"),
            "kv_heads": (8, MIXTRAL_CONFIG + ": num_key_value_heads 8 (grouped-query)"),
            "head_dim": (128, MIXTRAL_CONFIG + ": hidden_size 4,096 / 32 heads = 128"),
            "attention": ("gqa", MIXTRAL_CONFIG + ": MixtralForCausalLM, grouped-query attention"),
            "kv_latent_dim": (None, "Not MLA"),
            "default_precision": ("bf16", MIXTRAL_CONFIG + ": torch_dtype bfloat16"),
            "max_context_tokens": (32768, MIXTRAL_CONFIG + ": max_position_embeddings 32768"),
        },
    },
]


def load_catalogue(apps, schema_editor):
    LlmModel = apps.get_model("inventory", "LlmModel")
    for entry in CATALOGUE:
        LlmModel.objects.update_or_create(
            slug=entry["slug"],
            defaults={
                "name": entry["name"],
                "publisher": entry["publisher"],
                "source_url": entry["source_url"],
                "spec_sources": {name: source for name, (_, source) in entry["figures"].items()},
                **{name: value for name, (value, _) in entry["figures"].items()},
            },
        )


def unload_catalogue(apps, schema_editor):
    LlmModel = apps.get_model("inventory", "LlmModel")
    LlmModel.objects.filter(slug__in=[entry["slug"] for entry in CATALOGUE]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0005_rates_at_rate_precision'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='HistoricalLlmModel',
            fields=[
                ('id', models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name='ID')),
                ('slug', models.SlugField(max_length=64)),
                ('name', models.CharField(db_index=True, max_length=100)),
                ('publisher', models.CharField(help_text='Meta, Qwen, DeepSeek, Mistral AI, …', max_length=60)),
                ('parameters', models.PositiveBigIntegerField(help_text='Every parameter the weights hold (all experts of a mixture of experts).')),
                ('active_parameters', models.PositiveBigIntegerField(help_text='Parameters one token reads: the total for a dense model, fewer for a MoE.')),
                ('experts', models.PositiveSmallIntegerField(blank=True, help_text='Routed experts per MoE layer; empty for dense models.', null=True)),
                ('experts_per_token', models.PositiveSmallIntegerField(blank=True, help_text='Routed experts each token uses; empty for dense models.', null=True)),
                ('layers', models.PositiveIntegerField(help_text='Transformer blocks (num_hidden_layers).')),
                ('attention_heads', models.PositiveIntegerField(help_text='Query heads (num_attention_heads).')),
                ('kv_heads', models.PositiveIntegerField(help_text='Key/value heads (num_key_value_heads); divides the attention heads.')),
                ('head_dim', models.PositiveIntegerField(help_text='Dimension of one attention head.')),
                ('attention', models.CharField(choices=[('gqa', 'Multi-head / grouped-query attention (a key and a value per KV head)'), ('mla', 'Multi-head latent attention (one compressed latent vector)')], default='gqa', max_length=8)),
                ('kv_latent_dim', models.PositiveIntegerField(blank=True, help_text='MLA only: numbers cached per token and layer (kv_lora_rank + qk_rope_head_dim).', null=True)),
                ('default_precision', models.CharField(choices=[('bf16', 'BF16 (16 bits)'), ('fp8', 'FP8 (8 bits)'), ('int8', 'INT8 (8 bits)'), ('int4', 'INT4 (4 bits)')], help_text='The precision the publisher ships the weights in.', max_length=8)),
                ('max_context_tokens', models.PositiveIntegerField(help_text='The longest context the publisher supports, in tokens.')),
                ('source_url', models.URLField(help_text='The model card or config.json the figures come from.', max_length=300)),
                ('spec_sources', models.JSONField(blank=True, default=dict, help_text='Where each figure comes from, by field name.')),
                ('history_id', models.AutoField(primary_key=True, serialize=False)),
                ('history_date', models.DateTimeField(db_index=True)),
                ('history_change_reason', models.CharField(max_length=100, null=True)),
                ('history_type', models.CharField(choices=[('+', 'Created'), ('~', 'Changed'), ('-', 'Deleted')], max_length=1)),
                ('history_user', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'historical LLM model',
                'verbose_name_plural': 'historical LLM models',
                'ordering': ('-history_date', '-history_id'),
                'get_latest_by': ('history_date', 'history_id'),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name='LlmModel',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=64, unique=True)),
                ('name', models.CharField(max_length=100, unique=True)),
                ('publisher', models.CharField(help_text='Meta, Qwen, DeepSeek, Mistral AI, …', max_length=60)),
                ('parameters', models.PositiveBigIntegerField(help_text='Every parameter the weights hold (all experts of a mixture of experts).')),
                ('active_parameters', models.PositiveBigIntegerField(help_text='Parameters one token reads: the total for a dense model, fewer for a MoE.')),
                ('experts', models.PositiveSmallIntegerField(blank=True, help_text='Routed experts per MoE layer; empty for dense models.', null=True)),
                ('experts_per_token', models.PositiveSmallIntegerField(blank=True, help_text='Routed experts each token uses; empty for dense models.', null=True)),
                ('layers', models.PositiveIntegerField(help_text='Transformer blocks (num_hidden_layers).')),
                ('attention_heads', models.PositiveIntegerField(help_text='Query heads (num_attention_heads).')),
                ('kv_heads', models.PositiveIntegerField(help_text='Key/value heads (num_key_value_heads); divides the attention heads.')),
                ('head_dim', models.PositiveIntegerField(help_text='Dimension of one attention head.')),
                ('attention', models.CharField(choices=[('gqa', 'Multi-head / grouped-query attention (a key and a value per KV head)'), ('mla', 'Multi-head latent attention (one compressed latent vector)')], default='gqa', max_length=8)),
                ('kv_latent_dim', models.PositiveIntegerField(blank=True, help_text='MLA only: numbers cached per token and layer (kv_lora_rank + qk_rope_head_dim).', null=True)),
                ('default_precision', models.CharField(choices=[('bf16', 'BF16 (16 bits)'), ('fp8', 'FP8 (8 bits)'), ('int8', 'INT8 (8 bits)'), ('int4', 'INT4 (4 bits)')], help_text='The precision the publisher ships the weights in.', max_length=8)),
                ('max_context_tokens', models.PositiveIntegerField(help_text='The longest context the publisher supports, in tokens.')),
                ('source_url', models.URLField(help_text='The model card or config.json the figures come from.', max_length=300)),
                ('spec_sources', models.JSONField(blank=True, default=dict, help_text='Where each figure comes from, by field name.')),
            ],
            options={
                'verbose_name': 'LLM model',
                'ordering': ['publisher', 'name'],
                'constraints': [models.CheckConstraint(condition=models.Q(('parameters__gt', 0), ('active_parameters__gt', 0), ('layers__gt', 0), ('attention_heads__gt', 0), ('kv_heads__gt', 0), ('head_dim__gt', 0), ('max_context_tokens__gt', 0)), name='llm_model_figures_positive'), models.CheckConstraint(condition=models.Q(('active_parameters__lte', models.F('parameters'))), name='llm_model_active_within_total'), models.CheckConstraint(condition=django.db.models.lookups.Exact(django.db.models.functions.math.Mod(models.F('attention_heads'), models.F('kv_heads')), 0), name='llm_model_kv_heads_divide_heads'), models.CheckConstraint(condition=models.Q(models.Q(('attention', 'mla'), ('kv_latent_dim__gt', 0), ('kv_latent_dim__isnull', False)), models.Q(('attention', 'gqa'), ('kv_latent_dim__isnull', True)), _connector='OR'), name='llm_model_latent_only_for_mla'), models.CheckConstraint(condition=models.Q(models.Q(('experts__isnull', True), ('experts_per_token__isnull', True)), models.Q(('experts__gte', models.F('experts_per_token')), ('experts__isnull', False), ('experts_per_token__gt', 0), ('experts_per_token__isnull', False)), _connector='OR'), name='llm_model_experts_pair'), models.CheckConstraint(condition=models.Q(('default_precision__in', ['bf16', 'fp8', 'int8', 'int4'])), name='llm_model_precision_known')],
            },
        ),
        migrations.RunPython(load_catalogue, unload_catalogue),
    ]
