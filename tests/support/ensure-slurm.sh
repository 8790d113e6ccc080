#!/usr/bin/env bash
# Make this machine able to run the real Slurm clusters of the scheduler tests (metalfleet.testing.slurm): Debian's
# slurmctld, slurmd, slurm-client (sinfo, scontrol, srun) and munge. Installed, never started system-wide: every test
# cluster runs its own munged, slurmctld and slurmds under a temp dir. Idempotent; needs root (CI is root).
set -euo pipefail
PATH="$PATH:/usr/sbin:/sbin"
missing=()
command -v slurmctld >/dev/null 2>&1 || missing+=(slurmctld)
command -v slurmd >/dev/null 2>&1 || missing+=(slurmd)
{ command -v sinfo && command -v scontrol && command -v srun; } >/dev/null 2>&1 || missing+=(slurm-client)
{ command -v munged && command -v munge; } >/dev/null 2>&1 || missing+=(munge)
if [ ${#missing[@]} -gt 0 ]; then
  echo "slurm: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d keeps the packages from starting system-wide daemons (munge, slurmctld, slurmd services).
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "slurm: $(command -v slurmctld) $(command -v slurmd) $(command -v srun) $(command -v munged)" \
  "($(slurmd -V 2>/dev/null || echo 'version unknown'))"
