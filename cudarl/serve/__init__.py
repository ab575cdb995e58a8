"""Serving the trained agents (issue on serving; in progress): the A/B split between agent
versions (``ab``) and the request and answer records of ``POST /v1/optimize`` (``schemas``). The
Ray Serve application itself is not built yet."""
