from django.contrib.postgres.operations import BtreeGistExtension
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        # Exclusion constraints on (gpu =, period &&) need btree_gist.
        BtreeGistExtension(),
        migrations.CreateModel(
            name="IdempotencyRecord",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "scope",
                    models.CharField(help_text="Who owns the key, e.g. org:42.", max_length=64),
                ),
                ("key", models.CharField(max_length=255)),
                ("method", models.CharField(max_length=8)),
                ("path", models.CharField(max_length=512)),
                (
                    "fingerprint",
                    models.CharField(help_text="SHA-256 of method, path and body.", max_length=64),
                ),
                ("status_code", models.PositiveSmallIntegerField(blank=True, null=True)),
                ("response_body", models.JSONField(blank=True, null=True)),
                ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("scope", "key"), name="idempotency_key_unique_per_scope"
                    )
                ],
            },
        ),
    ]
