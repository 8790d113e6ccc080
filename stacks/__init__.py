"""metalfleet.stacks."""
