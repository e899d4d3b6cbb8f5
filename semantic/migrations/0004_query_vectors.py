from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('semantic', '0003_vector_delta'),
    ]

    operations = [
        migrations.CreateModel(
            name='QueryVector',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('model', models.CharField(max_length=200)),
                ('digest', models.CharField(max_length=64)),
                ('vector', models.BinaryField()),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('model', 'digest'), name='semantic_query_vector_unique')],
            },
        ),
    ]
