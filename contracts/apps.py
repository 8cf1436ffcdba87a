from django.apps import AppConfig


class ContractsConfig(AppConfig):
    """Contracts, typed clauses, the clause engine and contract events."""

    name = "contracts"
    verbose_name = "Contracts"
