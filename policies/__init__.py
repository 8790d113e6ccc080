"""metalfleet.policies."""
