"""Drop DRF authtoken's table where an earlier version left it: it holds the old keys in plain
text, and they no longer authenticate (ApiToken keeps hashes only). Reissue keys with createtoken."""
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [migrations.RunSQL("DROP TABLE IF EXISTS authtoken_token", reverse_sql=migrations.RunSQL.noop)]
