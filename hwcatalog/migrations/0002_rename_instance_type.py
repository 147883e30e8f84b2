from __future__ import annotations

from django.db import migrations


class Migration(migrations.Migration):
    """`instance_type` clashes with django-simple-history's own attribute of that name."""

    dependencies = [("hwcatalog", "0001_initial")]
    operations = [migrations.RenameField(model_name="offering", old_name="instance_type", new_name="instance_name")]
