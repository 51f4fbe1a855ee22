"""The environment as read: interpreter, installer backend, installed distributions, RECORDs and
their caches, requirements, names, paths, sizes."""
