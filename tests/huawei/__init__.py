"""Huawei BMS driver and emulator tests (over HTTP, signatures checked)."""
