from django.db import migrations

# The maintained starting lexicon; operators edit it in the admin afterwards.
SEED = {
    "代金券": "优惠券",
    "抵扣券": "优惠券",
    "折扣券": "优惠券",
    "满减券": "优惠券",
    "coupon": "优惠券",
    "用不了": "无法使用",
    "不能用": "无法使用",
    "用不上": "无法使用",
    "没法用": "无法使用",
    "核销失败": "无法使用",
    "小程序": "miniapp",
    "门店范围": "适用门店",
}


def seed(apps, schema_editor):
    Synonym = apps.get_model("knowledge", "Synonym")
    for term, canonical in SEED.items():
        Synonym.objects.get_or_create(term=term, defaults={"canonical": canonical})


def unseed(apps, schema_editor):
    Synonym = apps.get_model("knowledge", "Synonym")
    Synonym.objects.filter(term__in=SEED).delete()


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
