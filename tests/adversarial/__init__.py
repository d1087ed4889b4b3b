"""Adversarial contract suite. A package, so that its helpers import as
``adversarial.*`` from every test directory and its conftest never shadows the
top-level ``conftest`` module that other tests import by name."""
