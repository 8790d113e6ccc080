"""Simulated GPU hosts: see :mod:`.harness` (plain sandboxes) and :mod:`.vm` (each host its own machine)."""
