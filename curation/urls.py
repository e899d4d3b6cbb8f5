from django.urls import URLPattern

app_name = "curation"
urlpatterns: list[URLPattern] = []
