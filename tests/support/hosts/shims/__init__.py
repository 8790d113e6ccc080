"""The multi-call tool shim of the simulated hosts (copied into each fleet's bin dir and run there)."""
