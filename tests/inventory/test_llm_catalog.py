"""The model catalogue: the data migration's figures and sources, the rules, the database's
constraints, the API (everyone reads, operators write) and the admin page."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from inventory.models import LlmModel

pytestmark = pytest.mark.django_db

MODELS = "/api/v1/llm-models/"
SHIPPED = {
    "llama-3-1-8b",
    "llama-3-1-70b",
    "llama-3-1-405b",
    "qwen2-5-7b",
    "qwen2-5-72b",
    "deepseek-v3",
    "mistral-7b-v0-3",
    "mixtral-8x7b",
}
FIGURES = {
    "parameters",
    "active_parameters",
    "experts",
    "experts_per_token",
    "layers",
    "attention_heads",
    "kv_heads",
    "head_dim",
    "attention",
    "kv_latent_dim",
    "default_precision",
    "max_context_tokens",
}


def new_model(**overrides):
    body = {
        "slug": "phi-tiny",
        "name": "Phi Tiny",
        "publisher": "Example Labs",
        "parameters": 3_000_000_000,
        "layers": 32,
        "attention_heads": 32,
        "kv_heads": 8,
        "head_dim": 96,
        "max_context_tokens": 4096,
        "source_url": "https://huggingface.co/example/phi-tiny/blob/main/config.json",
    }
    return {**body, **overrides}


def test_the_catalogue_ships_every_model_with_a_source_per_figure():
    models = {model.slug: model for model in LlmModel.objects.all()}
    assert set(models) >= SHIPPED
    for model in models.values():
        assert set(model.spec_sources) == FIGURES, model.slug
        assert all(source.strip() for source in model.spec_sources.values())
        assert model.source_url.startswith("https://huggingface.co/"), model.slug


def test_catalogue_figures_match_the_published_configs():
    llama = LlmModel.objects.get(slug="llama-3-1-70b")
    assert (llama.layers, llama.attention_heads, llama.kv_heads, llama.head_dim) == (80, 64, 8, 128)
    assert llama.parameters == llama.active_parameters == 70_553_706_496
    deepseek = LlmModel.objects.get(slug="deepseek-v3")
    assert (deepseek.parameters, deepseek.active_parameters) == (671 * 10**9, 37 * 10**9)
    assert (deepseek.attention, deepseek.kv_latent_dim, deepseek.layers) == ("mla", 576, 61)
    assert deepseek.default_precision == "fp8"
    mixtral = LlmModel.objects.get(slug="mixtral-8x7b")
    assert (mixtral.experts, mixtral.experts_per_token) == (8, 2)
    qwen = LlmModel.objects.get(slug="qwen2-5-7b")
    assert (qwen.attention_heads, qwen.kv_heads) == (28, 4)


def test_everyone_reads_the_catalogue_by_slug_and_filters_it(customer, client_for):
    client = client_for(customer, scope="read")
    body = client.get(f"{MODELS}mixtral-8x7b/").json()
    assert body["active_parameters"] == 12_879_925_248
    assert "kv_heads" in body["spec_sources"]
    rows = client.get(f"{MODELS}?attention=mla").json()["results"]
    assert [row["slug"] for row in rows] == ["deepseek-v3"]
    rows = client.get(f"{MODELS}?publisher=meta&ordering=parameters").json()["results"]
    assert [row["slug"] for row in rows] == ["llama-3-1-8b", "llama-3-1-70b", "llama-3-1-405b"]


def test_an_operator_adds_a_model_and_a_dense_model_reads_all_its_parameters(operator, client_for):
    response = client_for(operator).post(MODELS, new_model(), format="json")
    assert response.status_code == 201, response.content
    model = LlmModel.objects.get(slug="phi-tiny")
    assert model.active_parameters == model.parameters == 3_000_000_000
    assert model.history.count() == 1


def test_only_operators_write_the_catalogue(provider, customer, client_for):
    for organization in (provider, customer):
        client = client_for(organization)
        response = client.post(MODELS, new_model(), format="json")
        assert (response.status_code, response.json()["code"]) == (403, "operator_only")
        response = client.patch(f"{MODELS}llama-3-1-8b/", {"layers": 1}, format="json")
        assert response.status_code == 403
    assert LlmModel.objects.get(slug="llama-3-1-8b").layers == 32


@pytest.mark.parametrize(
    ("overrides", "field", "code"),
    [
        ({"kv_heads": 5}, "kv_heads", "kv_heads_not_dividing"),
        ({"kv_heads": 64}, "kv_heads", "kv_heads_not_dividing"),
        ({"layers": 0}, "layers", "not_positive"),
        ({"head_dim": -128}, "head_dim", "not_positive"),
        ({"active_parameters": 4_000_000_000}, "active_parameters", "active_exceeds_total"),
        ({"attention": "mla"}, "kv_latent_dim", "latent_dim_required"),
        ({"kv_latent_dim": 512}, "kv_latent_dim", "latent_dim_only_for_mla"),
        ({"experts": 8}, "experts", "experts_pair"),
        ({"experts": 2, "experts_per_token": 4}, "experts_per_token", "experts_per_token_invalid"),
        ({"layers": 1.5}, "layers", "invalid"),
        ({"layers": 2**40}, "layers", "invalid"),
        ({"default_precision": "fp4"}, "default_precision", "invalid_choice"),
        ({"source_url": "not a url"}, "source_url", "invalid"),
        ({"slug": "Has Spaces"}, "slug", "invalid"),
        ({"colour": "blue"}, "colour", "unknown_field"),
    ],
)
def test_an_impossible_model_is_a_400_with_its_code_and_nothing_is_written(
    operator, client_for, overrides, field, code
):
    response = client_for(operator).post(MODELS, new_model(**overrides), format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == code
    assert body["detail"]["field"] == field
    assert not LlmModel.objects.filter(slug="phi-tiny").exists()


def test_a_slug_or_name_twice_is_a_409(operator, client_for):
    client = client_for(operator)
    taken = client.post(MODELS, new_model(slug="llama-3-1-8b"), format="json")
    assert (taken.status_code, taken.json()["code"]) == (409, "llm_model_exists")
    named = client.post(MODELS, new_model(name="llama 3.1 8b"), format="json")
    assert (named.status_code, named.json()["detail"]["field"]) == (409, "name")


def test_an_operator_corrects_figures_and_the_rules_judge_the_result(operator, client_for):
    client = client_for(operator)
    url = f"{MODELS}qwen2-5-7b/"
    response = client.patch(url, {"max_context_tokens": 32768}, format="json")
    assert (response.status_code, response.json()["max_context_tokens"]) == (200, 32768)
    # 28 heads cannot be shared by 8 KV heads, whatever the rest says.
    response = client.patch(url, {"kv_heads": 8}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "kv_heads_not_dividing")
    response = client.patch(url, {"layers": None}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "required")
    response = client.patch(url, {"slug": "renamed"}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "unknown_field")
    model = LlmModel.objects.get(slug="qwen2-5-7b")
    assert (model.kv_heads, model.layers, model.max_context_tokens) == (4, 28, 32768)
    assert model.history.first().history_change_reason.startswith("max_context_tokens changed")


@pytest.mark.parametrize(
    ("changes", "constraint"),
    [
        ({"kv_heads": 5}, "llm_model_kv_heads_divide_heads"),
        ({"kv_heads": 64}, "llm_model_kv_heads_divide_heads"),
        ({"layers": 0}, "llm_model_figures_positive"),
        ({"active_parameters": 10**12}, "llm_model_active_within_total"),
        ({"kv_latent_dim": 512}, "llm_model_latent_only_for_mla"),
        ({"experts": 8}, "llm_model_experts_pair"),
        ({"attention": "mla"}, "llm_model_latent_only_for_mla"),
        ({"default_precision": "fp4"}, "llm_model_precision_known"),
    ],
)
def test_the_database_refuses_an_impossible_model_written_past_the_service(changes, constraint):
    with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
        LlmModel.objects.filter(slug="llama-3-1-8b").update(**changes)


def test_operators_add_and_correct_models_in_the_admin(admin_client):
    url = "/admin/inventory/llmmodel/"
    form = {**new_model(), "attention": "gqa", "default_precision": "bf16", "spec_sources": "{}"}
    form["active_parameters"] = ""
    response = admin_client.post(f"{url}add/", form)
    assert response.status_code == 302, response.content[:2000]
    model = LlmModel.objects.get(slug="phi-tiny")
    assert model.active_parameters == 3_000_000_000
    change = {**form, "kv_heads": 5}
    response = admin_client.post(f"{url}{model.pk}/change/", change)
    assert response.status_code == 200
    assert "do not divide" in response.content.decode()
    assert LlmModel.objects.get(pk=model.pk).kv_heads == 8
    change = {**form, "max_context_tokens": 8192}
    response = admin_client.post(f"{url}{model.pk}/change/", change)
    assert response.status_code == 302
    assert LlmModel.objects.get(pk=model.pk).max_context_tokens == 8192
    assert admin_client.get(url).status_code == 200
