"""Integrations of evosdpa into other libraries (each an optional dependency, imported on use)."""
