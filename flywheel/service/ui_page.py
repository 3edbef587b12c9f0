"""The service page's HTML (`/ui`) and its sign-in form, server-rendered from `dashboard.collect`'s figures.

No script and nothing fetched: inline SVG charts, one inline stylesheet allowed by its SHA-256 in the
Content-Security-Policy (`HEADERS`), an empty data-URL favicon, a meta refresh. Catalog text is HTML-escaped.
Each figure `/metrics` also shows carries its sample's key and value (`data-metric`, `data-value`) for the
headless-browser test.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from html import escape
from typing import Any

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 24px 24px;color:#1d2330;background:#f6f7f9}
header{display:flex;align-items:baseline;gap:16px;flex-wrap:wrap;border-bottom:1px solid #d6d9e0;padding:12px 0}
h1{font-size:20px;margin:0}h2{font-size:15px;margin:0 0 8px}.muted{color:#6b7280}
.tiles{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.tile{background:#fff;border:1px solid #d6d9e0;border-radius:6px;padding:8px 14px;min-width:120px}
.tile .value{font-size:22px;font-weight:600}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:16px}
section{background:#fff;border:1px solid #d6d9e0;border-radius:6px;padding:12px 16px}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:3px 8px 3px 0;vertical-align:top}
th{font-weight:600;color:#4b5563;border-bottom:1px solid #e5e7eb}td.num{text-align:right;white-space:nowrap}
.err{color:#b91c1c}.ok{color:#15803d}.warn{color:#b45309}svg{display:block}
form{display:inline}button{font:inherit}input{font:inherit;width:28em}
"""
STYLE_HASH = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
HEADERS = {
    "Content-Security-Policy": f"default-src 'none'; style-src 'sha256-{STYLE_HASH}'; img-src data:; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
W, H, PAD = 560, 160, 34  # chart size and left/bottom padding (SVG user units)
STATE_CLASS = {"running": "ok", "starting": "warn", "restarting": "err", "unreachable": "err", "stopped": "warn"}


def _doc(title: str, body: str, refresh: int | None = None) -> str:
    meta = f'<meta http-equiv="refresh" content="{int(refresh)}">' if refresh else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">{meta}<title>{escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width,initial-scale=1"><link rel="icon" href="data:,">'
            f"<style>{STYLE}</style></head><body>{body}</body></html>")


def number(v: float) -> str:
    return f"{int(v):,}" if float(v).is_integer() else f"{v:,.3g}"


def size(v: float) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if v >= scale:
            return f"{v / scale:.1f} {unit}"
    return f"{int(v)} B"


def figure(key: str | None, value: float, text: str | None = None) -> str:
    """A figure's element; `key` (its `/metrics` sample) and exact value as data attributes."""
    attr = f' data-metric="{escape(key)}"' if key else ""
    return f'<span class="fig"{attr} data-value="{float(value)!r}">{escape(text or number(value))}</span>'


def _tile(label: str, key: str, figures: dict[str, float]) -> str:
    if key not in figures:
        return ""
    return f'<div class="tile"><div class="muted">{escape(label)}</div><div class="value">{figure(key, figures[key])}</div></div>'


def _hhmm(iso: str | None, long: bool = False) -> str:
    if not iso:
        return ""
    t = datetime.fromisoformat(iso.rstrip("Z"))
    return t.strftime("%m-%d %H:%M" if long else "%H:%M:%S")


def line_chart(times: list[str], values: list[float], label: str) -> str:
    """A step chart of a cumulative count over time (inline SVG)."""
    if not values:
        return '<p class="muted">nothing learned yet</p>'
    top = max(max(values), 1)
    n = len(values)
    xs = [PAD + (W - PAD - 8) * i / max(n - 1, 1) for i in range(n)]
    ys = [H - PAD - (H - PAD - 10) * v / top for v in values]
    d = f"M{xs[0]:.1f},{ys[0]:.1f}" + "".join(f"H{x:.1f}V{y:.1f}" for x, y in zip(xs[1:], ys[1:], strict=True))
    long = (datetime.fromisoformat(times[-1].rstrip("Z")) - datetime.fromisoformat(times[0].rstrip("Z"))).days >= 1
    return (f'<svg viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="{escape(label)}">'
            f'{_axes(number(top), _hhmm(times[0], long), _hhmm(times[-1], long))}'
            f'<path d="{d}" fill="none" stroke="#2563eb" stroke-width="2"/>'
            f'<path d="{d}V{H - PAD}H{xs[0]:.1f}Z" fill="#2563eb" fill-opacity="0.12"/></svg>')


def bar_chart(times: list[str], values: list[float], label: str, unit: str) -> str:
    """Bars over time (inline SVG), each with its value as a tooltip."""
    top = max([*values, 0]) or 1
    n = max(len(values), 1)
    bw = (W - PAD - 8) / n
    bars = "".join(
        f'<rect x="{PAD + i * bw:.1f}" y="{H - PAD - (H - PAD - 10) * v / top:.1f}" width="{max(bw - 1, 1):.1f}" '
        f'height="{(H - PAD - 10) * v / top:.1f}" fill="#059669"><title>{_hhmm(t)}: {v:.3g} {unit}</title></rect>'
        for i, (t, v) in enumerate(zip(times, values, strict=True)))
    return (f'<svg viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="{escape(label)}">'
            f'{_axes(f"{top:.3g}", _hhmm(times[0]) if times else "", _hhmm(times[-1]) if times else "")}{bars}</svg>')


def _axes(top: str, start: str, end: str) -> str:
    x0, y0 = PAD, H - PAD
    return (f'<line x1="{x0}" y1="10" x2="{x0}" y2="{y0}" stroke="#9ca3af"/>'
            f'<line x1="{x0}" y1="{y0}" x2="{W - 8}" y2="{y0}" stroke="#9ca3af"/>'
            f'<text x="{x0 - 4}" y="16" font-size="11" text-anchor="end" fill="#6b7280">{escape(top)}</text>'
            f'<text x="{x0 - 4}" y="{y0}" font-size="11" text-anchor="end" fill="#6b7280">0</text>'
            f'<text x="{x0}" y="{y0 + 16}" font-size="11" fill="#6b7280">{escape(start)}</text>'
            f'<text x="{W - 8}" y="{y0 + 16}" font-size="11" text-anchor="end" fill="#6b7280">{escape(end)} UTC</text>')


def _bar(value: float, top: float) -> str:
    width = 0 if top <= 0 else 200 * value / top
    return (f'<svg width="204" height="12"><rect width="204" height="12" fill="#eef0f3"/>'
            f'<rect width="{width:.1f}" height="12" fill="#6366f1"/></svg>')


def _bars_table(rows: list[tuple[str, str, float, str]], head: tuple[str, str]) -> str:
    top = max([v for _, _, v, _ in rows] + [0])
    body = "".join(f'<tr><td>{escape(name)}</td><td class="num">{figure(key, v, text)}</td><td>{_bar(v, top)}</td></tr>'
                   for name, key, v, text in rows)
    return f"<table><tr><th>{escape(head[0])}</th><th>{escape(head[1])}</th><th></th></tr>{body}</table>"


def _learner(s: dict[str, Any], figures: dict[str, float]) -> str:
    state = str(s.get("state", "unknown"))
    at = s.get("last_error_at")
    when = datetime.fromtimestamp(float(at), UTC).strftime("%Y-%m-%d %H:%M:%SZ") if isinstance(at, int | float) else ""
    rows = [("state", f'<span class="{STATE_CLASS.get(state, "")}" id="learner-state">{escape(state)}</span>')]
    if "galahad_learner_up" in figures:
        rows.append(("up", figure("galahad_learner_up", figures["galahad_learner_up"])))
    if "galahad_learner_restarts_total" in figures:
        rows.append(("restarts", figure("galahad_learner_restarts_total", figures["galahad_learner_restarts_total"])))
    rows.append(("pid", escape(str(s.get("pid") or ""))))
    err = s.get("last_error")
    rows.append(("last error", f'<span class="err" id="learner-error">{escape(str(err))}</span>' if err else
                 '<span class="muted" id="learner-error">none</span>'))
    if when:
        rows.append(("last error at", escape(when)))
    known = {"state", "up", "restarts", "pid", "last_error", "last_error_at"}
    rows += [(escape(str(k)), escape(str(v))[:300]) for k, v in s.items() if k not in known]
    return "<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def _latest(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return '<p class="muted">no verification yet</p>'
    body = "".join(
        f'<tr><td title="{escape(r["text"])}">{escape(r["text"][:120])}</td><td>{escape(str(r["answer"])[:60])}</td>'
        f'<td class="num">{escape((r["verified_at"] or "").replace("T", " "))}</td><td>{escape(r["scope"])}</td>'
        f'<td>{escape(r.get("provenance") or "sampled")}</td></tr>'
        for r in rows)
    return ("<table><tr><th>problem</th><th>answer</th><th>when (UTC)</th><th>scope</th><th>solution</th></tr>"
            f"{body}</table>")


def _tenants(rows: list[dict[str, Any]]) -> str:
    body = "".join(
        f'<tr><td>{escape(t["name"])}{" (revoked)" if t["revoked"] else ""}</td>'
        f'<td class="num">{figure(None, t["requests"])}</td><td class="num">{number(t["problems"])}</td>'
        f'<td class="num">{number(t["queued"])}</td><td class="num">{size(t["used_bytes"])}</td>'
        f'<td>{escape(", ".join(f"{k} {v}" for k, v in t["quotas"].items() if v is not None) or "none")}</td></tr>'
        for t in rows)
    return ("<table><tr><th>tenant</th><th>requests</th><th>problems</th><th>queued</th><th>store</th>"
            f"<th>quotas</th></tr>{body}</table>")


def page(d: dict[str, Any], signed_in: bool = False) -> str:
    """The page for `dashboard.collect`'s dict `d`; `signed_in`: the browser holds the sign-in cookie."""
    f = d["figures"]
    tiles = "".join(_tile(label, key, f) for label, key in (
        ("verified problems", "galahad_verified"), ("of them gold solutions", "galahad_gold_solutions"),
        ("queued", "galahad_queue_depth"),
        ("attempts", "galahad_attempts"), ("failed problems", "galahad_problems_failed_total"),
        ("artifacts deposited", "galahad_deposited"), ("artifacts evicted", "galahad_artifacts_evicted"),
        ("rebuilds", "galahad_artifact_rebuilds_total"), ("solves in flight", "galahad_solves_in_flight")))
    att = d["attempts"]
    recall = [(p, f'galahad_answers_total{{path="{p}"}}', v, None) for p, v in d["recall"].items()]
    store = [(t, f'galahad_store_bytes{{tier="{t}"}}', v, size(v)) for t, v in d["store"].items()]
    ram = ""
    if "galahad_ram_tier_capacity_bytes" in f:
        cap = f["galahad_ram_tier_capacity_bytes"]
        ram = (f'<p class="muted">RAM tier: capacity {figure("galahad_ram_tier_capacity_bytes", cap, size(cap))}'
               + "".join(f", {label} {figure(key, f[key])}" for label, key in (
                   ("hits", "galahad_ram_tier_hits_total"), ("misses", "galahad_ram_tier_misses_total")) if key in f)
               + "</p>")
    sign_out = ('<form method="post" action="/ui/logout"><button type="submit">sign out</button></form>'
                if signed_in else "")
    sections = [
        ("Verified problems over time", line_chart(d["verified"]["times"], d["verified"]["values"], "verified problems")),
        (f"Attempts per second (last {int(len(att['per_second']) * att['bucket_seconds'])} s: "
         f"{number(att['window_total'])} attempts)",
         bar_chart(att["times"], att["per_second"], "attempts per second", "attempts/s")),
        ("Recall hits by path (this replica's answers; base: the model alone)", _bars_table(recall, ("path", "answers"))),
        ("Store bytes per tier", _bars_table(store, ("tier", "bytes")) + ram),
        ("Learner", _learner(d["learner"], f)),
        ("Latest verified problems", _latest(d["latest"])),
    ]
    if d["tenants"]:
        sections.append(("Tenants", _tenants(d["tenants"])))
    body = "".join(f"<section><h2>{escape(title)}</h2>{html}</section>" for title, html in sections)
    return _doc("Galahad", f'<header><h1>Galahad</h1><span class="muted">model {escape(str(d["model"]))}</span>'
                f'<span class="muted">as of {escape(d["now"].replace("T", " "))}, reloads every '
                f'{int(d["refresh_seconds"])} s</span>{sign_out}</header><div class="tiles">{tiles}</div>'
                f'<div class="grid">{body}</div>', refresh=d["refresh_seconds"])


def sign_in_page(message: str) -> str:
    """The form a browser gets instead of a 401 or 403 on the page: the token goes into an HttpOnly cookie."""
    return _doc("Galahad: sign in", f'<header><h1>Galahad</h1></header><section><h2>Sign in</h2>'
                f'<p class="err" id="sign-in-message">{escape(message)}</p>'
                '<form method="post" action="/ui/login"><label>Token <input type="password" name="token" '
                'autocomplete="current-password" required></label> <button type="submit">sign in</button></form>'
                '<p class="muted">The admin\'s GALAHAD_API_TOKEN. Scripts send it as '
                "<code>Authorization: Bearer &lt;token&gt;</code> instead.</p></section>")
