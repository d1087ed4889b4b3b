"""The shim's tests (a package, so that its conftest.py is `shim.conftest`, not a second `conftest`)."""
