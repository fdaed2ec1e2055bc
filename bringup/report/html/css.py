"""The page's inline style sheet (no external assets); readable on screen and in print."""

STYLE = """
:root { --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --muted: #57606a; --line: #d0d7de; --changed: #fff1c2; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328; margin: 0;
       padding: 0 2rem 3rem; max-width: 1400px; }
header { border-bottom: 1px solid var(--line); margin-bottom: 1rem; padding-top: 1rem; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
h2 { font-size: 1.2rem; border-bottom: 1px solid var(--line); padding-bottom: .2rem; margin-top: 2rem; }
h3 { font-size: 1rem; margin: 1.2rem 0 .4rem; }
nav ul { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .3rem 1rem; }
nav a, td a { color: #0969da; }
table { border-collapse: collapse; margin: .4rem 0 1rem; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: .2rem .45rem; text-align: left; vertical-align: top; }
thead th { background: #f6f8fa; position: sticky; top: 0; }
table.facts th { background: #f6f8fa; font-weight: 600; white-space: nowrap; }
td { overflow-wrap: anywhere; max-width: 60ch; }
td.short { white-space: nowrap; }
.columns { display: flex; flex-wrap: wrap; gap: 0 2.5rem; }
.columns > section { flex: 1 1 24rem; }
caption { caption-side: top; text-align: left; color: var(--muted); padding-bottom: .2rem; }
.tiles { display: flex; flex-wrap: wrap; gap: .6rem; margin: .6rem 0; }
.tile { border: 1px solid var(--line); border-radius: 6px; padding: .4rem .7rem; min-width: 10rem; }
.tile b { display: block; font-size: 1.05rem; }
.badge { border-radius: 1em; padding: 0 .5em; font-size: 12px; white-space: nowrap; border: 1px solid currentColor; }
.status-supported, .status-pass, .status-ok, .status-measured { color: var(--ok); }
.status-unsupported, .status-skipped, .status-not-applicable, .status-partial { color: var(--muted); }
.status-unknown { color: var(--warn); }
.status-fail, .status-error, .status-crashed, .status-timeout, .status-mismatch, .status-compile-error
  { color: var(--bad); }
table.matrix td { text-align: center; white-space: nowrap; }
table.matrix td.status-pass { background: #dafbe1; color: #116329; }
table.matrix td.status-unsupported { background: #eaeef2; color: var(--muted); }
table.matrix td.status-fail, table.matrix td.status-error, table.matrix td.status-crashed,
table.matrix td.status-timeout { background: #ffebe9; color: var(--bad); font-weight: 600; }
table.matrix td.empty { color: #afb8c1; }
td.changed, tr.changed td { outline: 2px solid #d4a72c; outline-offset: -2px; background: var(--changed); }
tr.slower td { background: #ffebe9; }
tr.faster td { background: #dafbe1; }
tr.left-out td { color: var(--muted); }
details { margin: .3rem 0; }
details.case { border-left: 3px solid var(--bad); padding-left: .6rem; }
details:target, details.case:target { background: #fff8c5; }
summary { cursor: pointer; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f8fa; padding: .5rem; border-radius: 4px; }
.not-measured { color: var(--muted); font-style: italic; }
.note, .keys { color: var(--muted); }
.ok { color: var(--ok); }
.warn { color: var(--warn); }
.bad { color: var(--bad); }
.verdict { font-size: 1.25rem; margin: .4rem 0; }
figure { margin: .5rem 0; overflow-x: auto; }
svg text { font: 11px system-ui, sans-serif; fill: #1f2328; }
svg .axis-label { font-size: 12px; }
svg .grid { stroke: #eaeef2; }
svg .frame { stroke: #8c959f; }
@media print { thead th { position: static; } details { page-break-inside: avoid; } }
"""
