"""The metalfleet policy pack: assembles a PolicyPack from the rule set, nothing else.

The engine runs this file through the Python language host (``python -m pulumi.policy ... <pack folder>``, which
executes it as ``__main__``); importing it does nothing, because a PolicyPack starts a gRPC server and blocks.
Rules, settings and the validate seam live in :mod:`metalfleet.policies.crossguard`.
"""

if __name__ == "__main__":
    from pulumi_policy import EnforcementLevel, PolicyPack

    from metalfleet.policies.crossguard import PACK_NAME, build_policies

    PolicyPack(name=PACK_NAME, enforcement_level=EnforcementLevel.MANDATORY, policies=build_policies())
