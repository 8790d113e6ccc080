"""metalfleet.bootstrap."""
