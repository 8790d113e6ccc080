"""AWS driver and EC2 emulator tests: what the driver sent, as the emulator recorded it."""
