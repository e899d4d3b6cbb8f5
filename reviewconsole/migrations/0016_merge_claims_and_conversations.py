from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("reviewconsole", "0015_review_claims"),
        ("reviewconsole", "0015_review_conversations"),
    ]

    operations = []
