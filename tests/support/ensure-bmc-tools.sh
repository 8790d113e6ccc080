#!/usr/bin/env bash
# Make this machine able to run the simulated BMCs of the IPMI pool tests (metalfleet.testing.bmc): OpenIPMI's
# BMC simulator `ipmi_sim` (Debian package openipmi) and `ipmitool`. Idempotent; needs root (CI is root).
# The Redfish BMCs (sushy-tools) come with the venv (`pip install -e '.[dev]'`).
set -euo pipefail
missing=()
command -v ipmi_sim >/dev/null 2>&1 || missing+=(openipmi)
command -v ipmitool >/dev/null 2>&1 || missing+=(ipmitool)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d keeps the packages from starting system-wide daemons (openipmi's ipmievd/ipmi service).
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "bmc tools: $(command -v ipmi_sim) $(command -v ipmitool)"
