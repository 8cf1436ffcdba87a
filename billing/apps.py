from django.apps import AppConfig

from core.metrics import register_business_metrics


class BillingConfig(AppConfig):
    """Usage, rating, invoices, credit notes and Stripe."""

    name = "billing"
    verbose_name = "Billing"

    def ready(self) -> None:
        # The app registry is ready only now: the metrics module imports this app's models.
        from billing.metrics import business_metrics  # noqa: PLC0415 (models load after apps)

        register_business_metrics(self.label, business_metrics)
        # Budgets with the action "block" refuse new leases and holds (leasing asks, unaware).
        from billing.services.budgets import (  # noqa: PLC0415 (models load after apps)
            budget_admission_check,
        )
        from leasing.admission import (  # noqa: PLC0415 (it imports accounts' models)
            admission_check_register,
        )

        admission_check_register("billing.budgets", budget_admission_check)
        # Billing sits above leasing: its funds policies refuse new leases and holds through
        # leasing's admission checks (docs/ledger.md, "Burn-down and funds policies").
        from billing.services.funds_policy import (  # noqa: PLC0415 (models load after apps)
            funds_admission_check,
        )

        admission_check_register("billing.funds_policy", funds_admission_check)

        # Deposits are held when a lease is made and released when it ends (docs/ledger.md,
        # "Deposits"), in the lease's own transaction.
        from billing.services.deposits import (  # noqa: PLC0415 (models load after apps)
            deposit_hold,
            deposit_release,
        )
        from leasing.hooks import lease_hook_register  # noqa: PLC0415

        lease_hook_register("created", "billing.deposit_hold", deposit_hold)
        lease_hook_register("ended", "billing.deposit_release", deposit_release)
        # A sublease cut short by its parent (end_with_refund): time already invoiced after the
        # parent's end is credited back (docs/architecture.md, "Resale").
        from billing.services.resale_refunds import (  # noqa: PLC0415 (models load after apps)
            sublease_refund,
        )
        from leasing.hooks import sublease_hook_register  # noqa: PLC0415

        sublease_hook_register("parent_ended", "billing.sublease_refund", sublease_refund)
