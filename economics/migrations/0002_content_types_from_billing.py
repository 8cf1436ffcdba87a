"""The content types of the moved models change app label from billing to economics.

Each row is updated in place (same id), so the permissions that point at it (add/change/
delete/view of each model, recompute_asseteconomics) and the admin log entries stay attached to
the right model, and every user and group keeps what it was granted. On a new database there is
nothing to move: post_migrate creates the economics content types afterwards.

When a row already exists under the new label (a post_migrate ran in between), the old row is
left alone, as Django's own content-type renaming does; `manage.py remove_stale_contenttypes`
then shows what still points at it before anything is deleted.
"""

from django.db import IntegrityError, migrations, transaction

MODELS = (
    "asseteconomics",
    "assetmonth",
    "assetpayback",
    "capacitysignal",
    "economicsrun",
    "fxrate",
)


def _relabel(apps, schema_editor, *, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    rows = ContentType.objects.db_manager(schema_editor.connection.alias)
    for model in MODELS:
        try:
            with transaction.atomic(using=schema_editor.connection.alias):
                rows.filter(app_label=old, model=model).update(app_label=new)
        except IntegrityError:
            continue
    # Cached (app_label, model) -> content type pairs would still name the old label.
    ContentType.objects.clear_cache()


def forwards(apps, schema_editor):
    _relabel(apps, schema_editor, old="billing", new="economics")


def backwards(apps, schema_editor):
    _relabel(apps, schema_editor, old="economics", new="billing")


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("economics", "0001_initial"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
