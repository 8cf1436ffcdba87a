from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Organizations, their members and API keys."""

    name = "accounts"
    verbose_name = "Accounts"
