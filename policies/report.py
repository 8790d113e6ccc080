"""Reports of one policy run: text, Markdown (a PR comment), SARIF 2.1.0, JUnit XML, JSON and GitHub annotations.

Every format shows the suppressions (applied, unused, expired, invalid) beside the findings: a suppressed
finding is never silently dropped. Against a baseline (:mod:`.baseline`) every format also tells new findings
from accepted ones, and only new mandatory findings fail.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring_ascii as _json_str
from typing import TYPE_CHECKING, Any

from .engine import Finding, InputSummary, Report
from .rules import FRAMEWORKS, SEVERITY_SCORE, Rule

if TYPE_CHECKING:
    from .baseline import Comparison, Entry

__all__ = ["FORMATS", "MARKER", "render", "summary"]

TOOL = "metalfleet-policy"
INFO_URI = "https://github.com/metalfleet/metalfleet/blob/main/policies/RULES.md"
#: The first line of the Markdown report: a CI job finds and updates its earlier comment by it.
MARKER = "<!-- metalfleet-policy-check -->"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("metalfleet")
    except Exception:
        return "0.0.0"


def _rel(path: str | None) -> str | None:
    return _rel_cached(path) if path else None


@functools.lru_cache(maxsize=4096)
def _rel_cached(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _where(f: Finding) -> str:
    loc = f.location
    path = _rel(loc.file) or ""
    if path and loc.line:
        path += f":{loc.line}" + (f":{loc.column}" if loc.column else "")
    return path or (loc.address or "")


def summary(report: Report, baseline: Comparison | None = None) -> str:
    """One line: PASS/FAIL with the counts."""
    return _summary(report, baseline)


def _summary(report: Report, cmp: Comparison | None = None) -> str:
    blocking = len(report.blocking)
    advisory = sum(1 for f in report.findings if f.level != "mandatory")
    of = f"— {report.resources} resources from {len(report.inputs)} input(s), {len(report.rules)} rules"
    if cmp is not None:
        status = "FAIL" if cmp.new_blocking else "PASS"
        c = cmp.counts
        return (f"{status}: {cmp.new_blocking} new mandatory violation(s) ({c['new']} new, {c['accepted']} accepted "
                f"by the baseline, {c['fixed']} fixed; {blocking} mandatory, {advisory} advisory in all), "
                f"{len(report.suppressed)} suppressed {of}")
    status = "FAIL" if blocking else "PASS"
    return f"{status}: {blocking} mandatory violation(s), {advisory} advisory, {len(report.suppressed)} suppressed {of}"


def _fixed_line(e: Entry) -> str:
    return f"{e.rule} {e.resource}: {e.message}" if e.message else f"{e.rule} {e.resource}"


# ------------------------------------------------------------------------------------------ text


def render_text(report: Report, baseline: Comparison | None = None) -> str:
    inputs = ", ".join(f"{i.path} ({i.kind}, {i.resources} resources)" for i in report.inputs)
    lines = [f"metalfleet policy check — {inputs or 'no inputs'}"]
    lines.extend(f"not read: {n}" for i in report.inputs for n in i.notices)
    for f in report.findings:
        tag = "MANDATORY" if f.level == "mandatory" else "advisory "
        unknown = " [unknown]" if f.unknown else ""
        state = f" ({baseline.state(f)})" if baseline is not None else ""
        lines.append(f"{tag}{state} {f.rule.id} [{f.rule.severity}]{unknown} {_where(f)}: {f.message}")
    for f in report.suppressed:
        s = f.suppressed_by
        lines.append(f"suppressed {f.rule.id} {_where(f)}: {f.message} — {s.reason if s else ''}")
    if report.suppressions:
        lines.append("suppressions:")
        for st in report.suppressions:
            origin = st.suppression.origin.describe()
            lines.append(f"  {st.status:<8} {st.suppression.describe()} [{origin}]"
                         + (f" ({st.count} finding(s))" if st.count else ""))
    if baseline is not None and baseline.fixed:
        lines.append(f"fixed (in the baseline {baseline.path}, no longer found):")
        lines += [f"  {_fixed_line(e)}" for e in baseline.fixed]
    lines.append(_summary(report, baseline))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ Markdown


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


_MD_HEAD = ["| | Rule | Severity | Resource | Where | Finding |", "|---|---|---|---|---|---|"]


def _md_rows(findings: list[Finding]) -> list[str]:
    out = []
    for f in findings:
        mark = "🔴 mandatory" if f.level == "mandatory" else "🟡 advisory"
        out.append(f"| {mark} | `{f.rule.id}` {_md(f.rule.title)} | {f.rule.severity} | `{_md(f.resource_name)}` | "
                   f"`{_md(_where(f))}` | {_md(f.message)}{' (unknown)' if f.unknown else ''} |")
    return out


def _md_baseline(report: Report, cmp: Comparison) -> list[str]:
    """The sections a pull request reads: what it adds (new), what it removes (fixed), what was accepted."""
    new = [f for f in report.findings if cmp.is_new(f)]
    accepted = [f for f in report.findings if not cmp.is_new(f)]
    out = [f"### New ({len(new)})", ""]
    out += [*_MD_HEAD, *_md_rows(new), ""] if new else ["No new findings.", ""]
    out += [f"### Fixed ({len(cmp.fixed)})", ""]
    if cmp.fixed:
        out += ["| Rule | Resource | Finding (as recorded) |", "|---|---|---|"]
        out += [f"| `{e.rule}` | `{_md(e.resource)}` | {_md(e.message)} |" for e in cmp.fixed]
        out += ["", f"Remove them from the baseline: `--write-baseline {_md(cmp.path)}`.", ""]
    else:
        out += ["No baseline finding was fixed.", ""]
    out += [f"<details><summary>Accepted by the baseline ({len(accepted)})</summary>", ""]
    out += [*_MD_HEAD, *_md_rows(accepted)] if accepted else ["None."]
    return [*out, "", "</details>", ""]


def render_markdown(report: Report, baseline: Comparison | None = None) -> str:
    failing = baseline.new_blocking if baseline is not None else len(report.blocking)
    icon = "❌" if failing else "✅"
    out = [MARKER, f"## {icon} metalfleet policy check", "", _summary(report, baseline), ""]
    if baseline is not None:
        out += _md_baseline(report, baseline)
    elif report.findings:
        out += [*_MD_HEAD, *_md_rows(report.findings), ""]
    else:
        out += ["No findings.", ""]
    if report.suppressions:
        out += [f"<details><summary>Suppressions ({len(report.suppressions)})</summary>", "",
                "| Status | Rule | Scope | Reason | Expires | Declared at |", "|---|---|---|---|---|---|"]
        for st in report.suppressions:
            s = st.suppression
            scope = s.resource or (f"lines {s.lines[0]}-{s.lines[1]}" if s.lines else "all")
            out.append(f"| {st.status} ({st.count}) | `{s.rule}` | {_md(scope)} | {_md(s.reason or '**no reason**')} | "
                       f"{s.expires.isoformat() if s.expires else '-'} | `{_md(s.origin.describe())}` |")
        out += ["", "</details>", ""]
    fixes = {f.rule.id: f.rule for f in report.findings if baseline is None or baseline.is_new(f)}
    if fixes:
        out += ["<details><summary>How to fix</summary>", ""]
        for r in fixes.values():
            out.append(f"- **{r.id} {_md(r.title)}**: {_md(r.remediation)}")
        out += ["", "</details>", ""]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ SARIF


def _level(f: Finding) -> str:
    return "error" if f.level == "mandatory" else "warning"


def _rule_meta(r: Rule) -> dict[str, Any]:
    tags = ["security", f"severity/{r.severity}"]
    for key, refs in r.frameworks.items():
        tags += [f"{FRAMEWORKS[key]}: {ref}" for ref in refs]
    return {
        "id": r.id,
        "name": "".join(p.capitalize() for p in r.name.split("-")),
        "shortDescription": {"text": r.title},
        "fullDescription": {"text": r.rationale},
        "help": {"text": f"{r.remediation}", "markdown": f"**{r.title}**\n\n{r.rationale}\n\n**Fix:** {r.remediation}"},
        "helpUri": f"{INFO_URI}#{r.id.lower()}",
        "defaultConfiguration": {"level": "error" if r.enforcement == "mandatory" else "warning"},
        "properties": {"security-severity": SEVERITY_SCORE[r.severity], "tags": tags, "precision": "high",
                       "problem.severity": "error" if r.severity in ("critical", "high") else "warning"},
    }


def _location(f: Finding) -> dict[str, Any]:
    loc: dict[str, Any] = {}
    uri = _rel(f.location.file)
    if uri:
        physical: dict[str, Any] = {"artifactLocation": {"uri": uri.replace(os.sep, "/")}}
        if f.location.line:
            region: dict[str, Any] = {"startLine": f.location.line}
            if f.location.column:
                region["startColumn"] = f.location.column
            physical["region"] = region
        loc["physicalLocation"] = physical
    if f.location.address:
        loc["logicalLocations"] = [{"fullyQualifiedName": f.location.address, "kind": "resource"}]
    return loc


def _fingerprint(f: Finding) -> str:
    import hashlib  # here, not at the top: only SARIF needs it

    key = f"{f.rule.id}\x00{f.resource_name}\x00{f.location.address or ''}\x00{f.message}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _sarif_result(f: Finding, index: Mapping[str, int], cmp: Comparison | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {"ruleId": f.rule.id, "ruleIndex": index.get(f.rule.id, 0), "level": _level(f),
                           "message": {"text": f.message},
                           "partialFingerprints": {"metalfleetFinding/v1": _fingerprint(f)},
                           "properties": {"resource": f.resource_name, "resourceType": f.resource_type,
                                          "platform": f.platform, "input": f.source, "unknown": f.unknown,
                                          "enforcement": f.level}}
    loc = _location(f)
    if loc:
        res["locations"] = [loc]
    if f.suppressed_by is not None:
        s = f.suppressed_by
        in_source = bool(s.lines) or bool(s.origin.file and s.origin.file == f.location.file)
        res["suppressions"] = [{"kind": "inSource" if in_source else "external", "status": "accepted",
                                "justification": s.reason or "",
                                "location": {"physicalLocation": {"artifactLocation": {
                                    "uri": (_rel(s.origin.file) or "policy-config").replace(os.sep, "/")}}}}]
    if cmp is not None:
        from .baseline import fingerprint

        # SARIF 2.1.0 §3.27.24: "new" (not in the baseline), "unchanged" (in it); "absent" is written for fixed.
        res["baselineState"] = "new" if cmp.is_new(f) else "unchanged"
        res["partialFingerprints"]["metalfleetBaseline/v1"] = fingerprint(f)
        if f.level == "mandatory" and not cmp.is_new(f):
            res["level"] = "warning"  # accepted: listed, not failing
    return res


def _sarif_absent(e: Entry, index: Mapping[str, int]) -> dict[str, Any]:
    """A baseline entry no longer found: a result with baselineState "absent" (level none: nothing to fix)."""
    res: dict[str, Any] = {"ruleId": e.rule, "level": "none", "message": {"text": e.message or f"{e.rule} fixed"},
                           "baselineState": "absent", "partialFingerprints": {"metalfleetBaseline/v1": e.fingerprint},
                           "properties": {"resource": e.resource, "resourceType": e.resource_type}}
    if e.rule in index:
        res["ruleIndex"] = index[e.rule]
    if e.resource:
        res["locations"] = [{"logicalLocations": [{"fullyQualifiedName": e.resource, "kind": "resource"}]}]
    return res


def render_sarif(report: Report, baseline: Comparison | None = None) -> str:
    """SARIF 2.1.0. Results are serialised one by one (json's C encoder, no indentation), so a report with tens
    of thousands of findings is never held as one large object tree."""
    index = {r.id: i for i, r in enumerate(report.rules)}
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": TOOL, "version": _version(), "informationUri": INFO_URI,
                                "rules": [_rule_meta(r) for r in report.rules]}},
            "invocations": [{"executionSuccessful": True,
                             "toolExecutionNotifications": [
                                 {"level": "note", "message": {"text": f"suppression {st.status}: "
                                                                        f"{st.suppression.describe()}"}}
                                 for st in report.suppressions]}],
            "properties": {"inputs": [_input_json(i) for i in report.inputs]},
            "results": "@RESULTS@",
        }],
    }
    head, tail = json.dumps(doc, separators=(",", ":")).split('"@RESULTS@"')
    items = [json.dumps(_sarif_result(f, index, baseline), separators=(",", ":"))
             for f in [*report.findings, *report.suppressed]]
    if baseline is not None:
        items += [json.dumps(_sarif_absent(e, index), separators=(",", ":")) for e in baseline.fixed]
    results = ",\n".join(items)
    return f"{head}[\n{results}\n]{tail}\n"


# ------------------------------------------------------------------------------------------ JUnit


def render_junit(report: Report, baseline: Comparison | None = None) -> str:
    from xml.etree import ElementTree as ET

    suites = ET.Element("testsuites", name="metalfleet policy check")
    total = failures = skipped = 0
    by_rule: dict[str, list[Finding]] = {}
    for f in [*report.findings, *report.suppressed]:
        by_rule.setdefault(f.rule.id, []).append(f)
    for r in report.rules:
        found = by_rule.get(r.id, [])
        suite = ET.SubElement(suites, "testsuite", name=f"{r.id} {r.title}")
        n_fail = n_skip = 0
        if not found:
            ET.SubElement(suite, "testcase", classname=r.id, name="all resources comply")
        for f in found:
            case = ET.SubElement(suite, "testcase", classname=r.id, name=f"{f.resource_name} ({_where(f)})")
            if f.suppressed_by is not None:
                ET.SubElement(case, "skipped", message=f"suppressed: {f.suppressed_by.reason or ''}")
                n_skip += 1
            elif baseline is not None and not baseline.is_new(f):
                ET.SubElement(case, "skipped", message=f"accepted by the baseline {baseline.path}: {f.message}")
                n_skip += 1
            elif f.level == "mandatory":
                fail = ET.SubElement(case, "failure", message=f.message, type=r.severity)
                fail.text = f"{f.message}\n{_where(f)}\nFix: {r.remediation}"
                n_fail += 1
            else:
                out = ET.SubElement(case, "system-out")
                out.text = f"advisory: {f.message}"
        tests = max(len(found), 1)
        suite.set("tests", str(tests))
        suite.set("failures", str(n_fail))
        suite.set("skipped", str(n_skip))
        suite.set("errors", "0")
        total, failures, skipped = total + tests, failures + n_fail, skipped + n_skip
    suites.set("tests", str(total))
    suites.set("failures", str(failures))
    suites.set("skipped", str(skipped))
    suites.set("errors", "0")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


# ------------------------------------------------------------------------------------------ JSON


def _finding_json(f: Finding) -> dict[str, Any]:
    return {"rule": f.rule.id, "title": f.rule.title, "severity": f.rule.severity, "enforcement": f.level,
            "unknown": f.unknown, "resource": f.resource_name, "resource_type": f.resource_type,
            "platform": f.platform, "input": f.source, "message": f.message,
            "location": {"file": f.location.file, "line": f.location.line, "column": f.location.column,
                         "address": f.location.address},
            "suppressed_by": f.suppressed_by.describe() if f.suppressed_by else None}


def _json_head(report: Report, cmp: Comparison | None = None) -> dict[str, Any]:
    """The JSON report without its findings."""
    blocking = report.blocking
    advisory = sum(f.level != "mandatory" for f in report.findings)
    summary: dict[str, Any] = {"mandatory": len(blocking), "advisory": advisory, "suppressed": len(report.suppressed),
                               "resources": report.resources}
    if cmp is not None:
        summary["baseline"] = {"file": cmp.path, "new_mandatory": cmp.new_blocking, **cmp.counts}
    return {
        "result": "fail" if (cmp.new_blocking if cmp is not None else blocking) else "pass",
        "summary": summary,
        "inputs": [_input_json(i) for i in report.inputs],
        "suppressions": [{"rule": st.suppression.rule, "resource": st.suppression.resource,
                          "reason": st.suppression.reason, "status": st.status, "count": st.count,
                          "expires": st.suppression.expires.isoformat() if st.suppression.expires else None,
                          "declared_at": st.suppression.origin.describe()} for st in report.suppressions],
    }


def _input_json(i: InputSummary) -> dict[str, Any]:
    """An input as JSON and SARIF name it; ``not_read`` only when it names what was not read."""
    doc: dict[str, Any] = {"path": i.path, "kind": i.kind, "resources": i.resources}
    if i.notices:
        doc["not_read"] = list(i.notices)
    return doc


def _json_doc(report: Report, cmp: Comparison | None = None) -> dict[str, Any]:
    head = _json_head(report, cmp)
    doc = {"result": head["result"], "summary": head["summary"], "inputs": head["inputs"],
           "findings": [_finding_json(f) for f in report.findings],
           "suppressed": [_finding_json(f) for f in report.suppressed], "suppressions": head["suppressions"]}
    if cmp is not None:
        for f, d in zip([*report.findings, *report.suppressed], [*doc["findings"], *doc["suppressed"]], strict=True):
            d["baseline"] = cmp.state(f)
        doc["fixed"] = [e.as_json() for e in cmp.fixed]
    return doc


def _json_value(v: Any) -> str:
    """``json.dumps(v)`` (ASCII, no indent), the common case without the encoder's set-up."""
    if type(v) is str:
        return _json_str(v)
    if v is None:
        return "null"
    if type(v) is int:
        return int.__repr__(v)
    return json.dumps(v)


def _findings_compact(findings: list[Finding]) -> str:
    """``json.dumps([_finding_json(f) for f in findings])``, byte for byte, without building the dicts: the
    parts findings share (rule, level, resource type, file) are encoded once."""
    heads: dict[tuple[str, str, str, str, bool], str] = {}
    mids: dict[tuple[str, str, str], str] = {}
    files: dict[str | None, str] = {}
    out = []
    for f in findings:
        r = f.rule
        key = (r.id, r.title, r.severity, f.level, f.unknown)
        head = heads.get(key)
        if head is None:
            head = heads[key] = (f'{{"rule": {_json_value(r.id)}, "title": {_json_value(r.title)}, "severity": '
                                 f'{_json_value(r.severity)}, "enforcement": {_json_value(f.level)}, "unknown": '
                                 f'{_json_value(f.unknown)}, "resource": ')
        mkey = (f.resource_type, f.platform, f.source)
        mid = mids.get(mkey)
        if mid is None:
            mid = mids[mkey] = (f', "resource_type": {_json_value(f.resource_type)}, "platform": '
                                f'{_json_value(f.platform)}, "input": {_json_value(f.source)}, "message": ')
        loc = f.location
        file = files.get(loc.file)
        if file is None:
            file = files[loc.file] = _json_value(loc.file)
        sup = f.suppressed_by.describe() if f.suppressed_by else None
        out.append(f'{head}{_json_value(f.resource_name)}{mid}{_json_value(f.message)}, "location": {{"file": {file}, '
                   f'"line": {_json_value(loc.line)}, "column": {_json_value(loc.column)}, "address": '
                   f'{_json_value(loc.address)}}}, "suppressed_by": {_json_value(sup)}}}')
    return f"[{', '.join(out)}]"


def _json_compact(report: Report) -> str:
    """``json.dumps(_json_doc(report)) + "\\n"`` (no indent), byte for byte; the findings, nearly all of a large
    report, are written by :func:`_findings_compact`."""
    head = _json_head(report)
    return (f'{{"result": {json.dumps(head["result"])}, "summary": {json.dumps(head["summary"])}, "inputs": '
            f'{json.dumps(head["inputs"])}, "findings": {_findings_compact(report.findings)}, "suppressed": '
            f'{_findings_compact(report.suppressed)}, "suppressions": {json.dumps(head["suppressions"])}}}\n')


def render_json(report: Report, baseline: Comparison | None = None) -> str:
    if baseline is not None:  # a pull request's check: the plain encoder (the compact one knows no baseline)
        doc = _json_doc(report, baseline)
        return json.dumps(doc, indent=2 if len(report.findings) + len(report.suppressed) < 2000 else None) + "\n"
    if len(report.findings) + len(report.suppressed) < 2000:
        return json.dumps(_json_doc(report), indent=2) + "\n"
    return _json_compact(report)  # large: no indent, as json.dumps(doc) writes it, without the dicts


# ------------------------------------------------------------------------------------------ GitHub


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: Report, baseline: Comparison | None = None) -> str:
    """Workflow commands GitHub Actions turns into annotations on the pull request's files (against a baseline,
    only for new findings: an accepted one is not the pull request's doing)."""
    lines = []
    for f in [*report.findings, *report.suppressed]:
        if baseline is not None and not baseline.is_new(f):
            continue
        cmd = "notice" if f.suppressed_by else ("error" if f.level == "mandatory" else "warning")
        props = []
        path = _rel(f.location.file)
        if path:
            props.append(f"file={_gh_prop(path)}")
            if f.location.line:
                props.append(f"line={f.location.line}")
                if f.location.column:
                    props.append(f"col={f.location.column}")
        props.append(f"title={_gh_prop(f'{f.rule.id} {f.rule.title}')}")
        msg = f.message + (f" (suppressed: {f.suppressed_by.reason})" if f.suppressed_by else "")
        lines.append(f"::{cmd} {','.join(props)}::{_gh_data(msg)}")
    for st in report.suppressions:
        if st.status in ("expired", "unused"):
            title = _gh_prop("suppression " + st.status)
            lines.append(f"::notice title={title}::{_gh_data(st.suppression.describe())}")
    lines.extend(f"::notice title=not read::{_gh_data(n)}" for i in report.inputs for n in i.notices)
    lines.append(f"::notice title=metalfleet policy check::{_gh_data(_summary(report, baseline))}")
    return "\n".join(lines) + "\n"


FORMATS: dict[str, Callable[..., str]] = {
    "text": render_text, "markdown": render_markdown, "sarif": render_sarif, "junit": render_junit,
    "json": render_json, "github": render_github,
}


def render(report: Report, fmt: str, baseline: Comparison | None = None) -> str:
    """``report`` in format ``fmt``; with ``baseline``, new findings told from accepted ones and fixed listed."""
    return FORMATS[fmt](report, baseline) if baseline is not None else FORMATS[fmt](report)
