"""Asset economics moved to the economics app: billing forgets its models, the tables stay.

State only: the tables (billing_fxrate, billing_assetmonth, billing_assetpayback,
billing_capacitysignal, billing_economicsrun), their rows, constraints and indexes are left as
they are; economics 0001 takes the same models over with the same table names.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0007_asset_economics_proxy"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="AssetEconomics"),
                migrations.DeleteModel(name="AssetMonth"),
                migrations.DeleteModel(name="AssetPayback"),
                migrations.DeleteModel(name="CapacitySignal"),
                migrations.DeleteModel(name="EconomicsRun"),
                migrations.DeleteModel(name="FxRate"),
            ],
            database_operations=[],
        ),
    ]
