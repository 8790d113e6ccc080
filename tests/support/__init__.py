"""Offline stand-ins for the real parts metalfleet talks to, shipped so users can test without a cloud.

* :mod:`metalfleet.testing.ec2`: the EC2 API (moto in server mode, extended where moto lacks behaviour),
  served over HTTP on 127.0.0.1; boto3 reaches it through ``AWS_ENDPOINT_URL``.
* :mod:`metalfleet.testing.kit`: what every emulator shares - fault switch and WSGI fault middleware with the
  control endpoint, test clock, a simulated GPU host per instance, the client object that starts an emulator
  process and the server's main loop. A new emulator imports it (the module docstring shows how).
* :mod:`metalfleet.testing.hosts`: simulated GPU hosts - a real sshd per host on a 127.x address whose
  system tools answer from the host's simulated hardware and real captured outputs
  (``metalfleet/testing/fixtures``, provenance in its SOURCES.md). Needs root (sshd, namespaces).
* :mod:`metalfleet.testing.slurm`: a real Slurm cluster on this machine (Debian's munged, slurmctld and one
  slurmd per node on 127.x addresses), from the config texts metalfleet writes. Needs root and the packages
  ``tests/support/ensure-slurm.sh`` installs.
* :mod:`metalfleet.testing.usage`: which of these a process started (the test suite counts tests per area).

Install with ``pip install 'metalfleet[testing]'``. Lives in the repository's ``tests/support/`` folder.
"""
