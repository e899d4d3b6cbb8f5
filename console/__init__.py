"""The project shell: settings, URLs, the WSGI entry, the dashboard and the demo loader.

It sits above every app and is the only package that may import them all (see
docs/architecture.md); the shared core is ``reviewconsole``.
"""
