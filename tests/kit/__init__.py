"""What the tests and the benches share (tests/README.md, "The shared kit").

- `kit.poll`: wait, bounded, for a condition another process makes true;
- `kit.spool`: a request written as a shim writes it, and the worker's answer;
- `kit.supervisor`: ``kexpr supervise`` started and stopped as an operator does;
- `kit.bodies`: the host-shaped bodies presentations use: the one styled message
  (`STYLED_BODY`, `present_styled`) and a daily body with nothing to style.

bench/ puts tests/ on sys.path first, so it imports these as the tests do."""
