"""Local emulators of provider APIs, started and stopped by the test run itself."""
