#!/usr/bin/env bash
# Make this machine able to run simulated SSH hosts: OpenSSH server installed (not started: every
# test host runs its own sshd), the privilege-separation dir, and the unprivileged login user
# "mfnode" (/bin/sh, its own home) that test sessions run as. Idempotent; needs root (CI is root).
set -euo pipefail
if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ]; then
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d keeps the package from starting a system-wide sshd on port 22.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null
fi
command -v ssh-keygen >/dev/null 2>&1 || { apt-get update -qq; apt-get install -y -qq openssh-client >/dev/null; }
mkdir -p /run/sshd && chmod 0755 /run/sshd
if ! id mfnode >/dev/null 2>&1; then
  useradd --system --create-home --home-dir /var/lib/mfnode --shell /bin/sh mfnode
fi
# sshd refuses a locked account ("!" in shadow) even for key logins without PAM: make it "no password".
if getent shadow mfnode | cut -d: -f2 | grep -q '^!'; then
  usermod -p '*' mfnode
fi
echo "sshd: $(command -v sshd || echo /usr/sbin/sshd); user mfnode ok"
