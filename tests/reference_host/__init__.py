"""A reference host for the tests: a small fake gateway that integrates the shim
exactly as the plan's Hermes-side sections require, with the seams the real host
has at the plan's pin (Hermes@4305027f; docs/hermes-integration.md walks them), so
the tests can prove the host-side guarantees (design §8 "Host integration contract").

- ``daily``: the Save edit, once, its result observed (the host swallows a failed
  edit; the report says which it was); replay is canonical-only.
- ``weekly``: a scheduled-delivery ledger; ``template_digest`` over the JSON-quoted
  body; pin-before-send; restart sends the pinned bytes with zero presentations.
- ``adaptive``: the operator service with the host's two locks (a re-entrant
  authority lock; a ledger lock that is a no-op under a profile root and an fcntl
  lock otherwise), ``mark_publish_pending`` and the plan's
  ``validate_and_mark_presented_card``; the review-callback handler as the host runs
  it; recovery republishes the stored payload.
- ``bot``: the Telegram callback query the handlers await; ``hooks``: a coordinator
  with a hook after candidate creation (the plan's race test).
- ``scripted_worker``: a thread standing in for the worker (dedupes by artifact
  key like the real one, counts provider calls).

Nothing here is product code.
"""
