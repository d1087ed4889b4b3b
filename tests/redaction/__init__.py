"""Redaction proofs: customer material never leaves the gateway. A package,
for the same reason as ``tests/adversarial``."""
