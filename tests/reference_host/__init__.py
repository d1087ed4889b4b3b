"""A reference host for the tests: a small fake gateway that integrates the shim
exactly as the plan's Hermes-side sections require, so the tests can prove the
host-side guarantees (design §8 "Host integration contract").

- ``weekly``: a scheduled-delivery ledger; pin-before-send; restart sends the
  pinned bytes with zero presentations.
- ``adaptive``: an operator service with two locks and an immutable pending-card
  store; ``validate_and_mark_presented_card`` calls the shim's ``revalidate``
  under both locks; recovery republishes the stored payload.
- ``daily``: first save edits once; replay is canonical-only.
- ``scripted_worker``: a thread standing in for the worker (dedupes by artifact
  key like the real one, counts provider calls).

Nothing here is product code.
"""
