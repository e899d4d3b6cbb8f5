import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from semantic.embedders import preloaded

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
application = get_wsgi_application()

# Import every view and API module now rather than on a worker's first request, so a server
# started with --preload forks workers that answer their first request at full speed.
get_resolver().url_patterns  # noqa: B018

# The embedding model too: loaded once in the master, shared by the forked workers (copy on
# write), rather than loaded by each worker on its first search.
preloaded()
