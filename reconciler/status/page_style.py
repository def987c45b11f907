"""The stylesheet of the status page (inlined: the page fetches nothing). Health colours are CSS
variables: --ok (Running), --progress (Provisioning, Pending), --problem (failing), --neutral (idle).
Boxes set only border width and style; the health classes, last, give the colour."""

STYLE = """
:root{--ok:#bbf7d0;--ok-b:#15803d;--progress:#fde68a;--progress-b:#b45309;--problem:#fecaca;
--problem-b:#b91c1c;--neutral:#f3f4f6;--neutral-b:#9ca3af;--other:#e5e7eb;--other-b:#4b5563}
body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#111827;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:20px 0 8px}
code{overflow-wrap:anywhere}
.chips{display:flex;flex-wrap:wrap;gap:6px;padding:0;margin:6px 0;list-style:none}
.chip{padding:1px 8px;border-radius:10px;font-size:12px;border-width:1px;border-style:solid}
.attention{list-style:none;padding:0;margin:0;display:grid;gap:6px}
.attention li{border-width:0 0 0 6px;border-style:solid;padding:6px 10px;border-radius:4px}
.why{display:block;font-size:13px;overflow-wrap:anywhere}
.messages{list-style:none;padding:0;margin:4px 0 0}
.attention .messages li{border:0;padding:2px 0;background:transparent}
.who{display:inline-block;font-size:12px;margin:1px 6px 1px 0;overflow-wrap:anywhere}
.pools{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:10px}
.pool{border:1px solid #d1d5db;border-radius:8px;padding:10px}
.pool h3{font-size:15px;margin:0 0 6px;overflow-wrap:anywhere} .pool p{margin:4px 0;font-size:13px}
.bar{display:flex;height:14px;border-radius:4px;overflow:hidden;
background:var(--neutral);border:1px solid #d1d5db}
.bar span{display:block;height:100%} .bar .used{background:var(--ok-b)}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:13px}
td,th{padding:3px 10px;border-bottom:1px solid #e5e7eb;text-align:left;white-space:nowrap}
td.phase{border-left-width:6px;border-left-style:solid}
details{margin:6px 0} summary{cursor:pointer;font-weight:600;overflow-wrap:anywhere}
details details{margin-left:14px} details details summary{font-weight:500}
.tiles{display:flex;flex-wrap:wrap;gap:6px;margin:6px 0}
.host{width:148px;min-height:60px;border-radius:6px;padding:5px;box-sizing:border-box;display:flex;
flex-direction:column;gap:1px;border-width:2px;border-style:solid}
.host b{font-size:12px;overflow-wrap:anywhere} .host small{font-size:11px;overflow-wrap:anywhere}
.host small.tenant{font-style:italic}
.gpu{display:grid;grid-template-columns:repeat(8,1fr);gap:1px;height:10px;margin-top:2px;background:#6b7280}
.mig{display:block}
.ok{background:var(--ok);border-color:var(--ok-b)}
.progress{background:var(--progress);border-color:var(--progress-b)}
.problem{background:var(--problem);border-color:var(--problem-b)}
.neutral{background:var(--neutral);border-color:var(--neutral-b)}
.other{background:var(--other);border-color:var(--other-b)}
.host.unavailable{border-style:dashed;border-color:var(--problem-b)}
.mig.ok{background:var(--ok-b)} .mig.free{background:var(--neutral)}
.mig.progress{background:var(--progress-b)} .mig.problem{background:var(--problem-b)}
@media (max-width:600px){body{margin:8px} .host{width:calc(50% - 3px)}}
"""
