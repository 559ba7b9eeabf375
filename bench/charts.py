#!/usr/bin/env python3
"""The SVG charts of docs/benchmarks.md, drawn from the raw files bench/run.sh writes.

    python3 bench/charts.py [DATA_DIR [OUT_DIR]]    # defaults: docs/bench/data, docs/bench

Reads whichever of matrix.txt, soak.txt, startup.txt, idle.txt and shards.txt exist in DATA_DIR and
writes their charts into OUT_DIR, one line on stdout per file written; from matrix.txt also
summary.md, the same-run table of ratios that docs/benchmarks.md quotes. Standard library only,
so it runs wherever python3 does, and deterministic (same input, byte-identical SVG), so a
regenerated chart only shows up in a diff when its data changed.
"""
import math
import statistics
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 800
FONT = "system-ui, sans-serif"
INK, MUTED, GRID, FAILED = "#111827", "#4b5563", "#e5e7eb", "#b91c1c"
PEER_ORDER = ["tokio", "smol", "everything", "rmcp", "ts", "py", "null"]
PEER_COLOURS = {"tokio": "#d97706", "smol": "#2563eb", "rmcp": "#6b7280", "ts": "#16a34a",
                "py": "#9333ea", "null": "#111827", "everything": "#f59e0b"}
FALLBACK = ["#dc2626", "#0891b2", "#db2777", "#65a30d", "#7c3aed", "#ca8a04", "#0f766e", "#92400e"]
TRANSPORT_ORDER = ["stdio", "http"]


class InputError(Exception):
    """A malformed input line; the message names the file and line number."""


# ---------------------------------------------------------------------------------- parsing

def data_lines(path):
    """(line number, fields) of each line of PATH that is neither blank nor a # comment."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            fields = line.split()
            if fields and not fields[0].startswith("#"):
                yield n, fields


def fail(path, n, message):
    raise InputError(f"{path}:{n}: {message}")


def key_values(path, n, fields):
    kv = {}
    for field in fields:
        key, eq, value = field.partition("=")
        if not key or not eq:
            fail(path, n, f"expected key=value, got {field!r}")
        kv[key] = value
    return kv


def number(path, n, kv, key, required=True, na_ok=False):
    """KEY's value as a float; None when it is absent (and optional) or `na` (and allowed)."""
    if key not in kv:
        if required:
            fail(path, n, f"missing {key}=")
        return None
    if na_ok and kv[key] == "na":
        return None
    try:
        value = float(kv[key])
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        fail(path, n, f"{key}={kv[key]!r} is not a number")
    return value


def read_matrix(path):
    """{(transport, load, conc): {peer: [run or None (ERROR), ...]}} and the peers, first seen first."""
    cells, peers = {}, {}
    for n, f in data_lines(path):
        if len(f) < 5:
            fail(path, n, "expected PEER TRANSPORT LOAD CONC and results (or ERROR)")
        peer, transport, load, conc = f[:4]
        if not conc.isdigit():
            fail(path, n, f"concurrency {conc!r} is not an integer")
        peers.setdefault(peer, None)
        runs = cells.setdefault((transport, load, int(conc)), {}).setdefault(peer, [])
        if f[4:] == ["ERROR"]:
            runs.append(None)
            continue
        kv = key_values(path, n, f[4:])
        runs.append({"rps": number(path, n, kv, "rps"), "p50": number(path, n, kv, "p50_us"),
                     "p99": number(path, n, kv, "p99_us"),
                     "rss_kb": number(path, n, kv, "server_peak_rss_kb", required=False, na_ok=True)})
    return cells, list(peers)


def read_soak(path):
    samples = []
    for n, f in data_lines(path):
        kv = key_values(path, n, f)
        sample = {"t_s": number(path, n, kv, "t_s"), "rss_kb": number(path, n, kv, "rss_kb")}
        for key in ("rps", "sessions", "streams", "tasks"):
            sample[key] = number(path, n, kv, key, required=False, na_ok=True)
        samples.append(sample)
    return sorted(samples, key=lambda s: s["t_s"])


def read_startup(path):
    """{peer: [milliseconds or None (ms=ERROR)]}."""
    runs = {}
    for n, f in data_lines(path):
        if len(f) < 2:
            fail(path, n, "expected PEER ms=M")
        kv = key_values(path, n, f[1:])
        ms = None if kv.get("ms") == "ERROR" else number(path, n, kv, "ms")
        runs.setdefault(f[0], []).append(ms)
    return runs


def read_idle(path):
    """{peer: {"connection"|"session"|"stream": bytes per idle one, or None (ERROR)}}."""
    out = {}
    for n, f in data_lines(path):
        if len(f) < 2:
            fail(path, n, "expected PEER key=value...")
        if f[1] == "ERROR":
            out[f[0]] = {k: None for k in IDLE_KINDS}
            continue
        kv = key_values(path, n, f[1:])
        out[f[0]] = {k: number(path, n, kv, f"bytes_per_idle_{k}") for k in IDLE_KINDS}
    return out


def read_shards(path):
    """{(peer, shards): [run or None (ERROR)]}, each run {"rps", "p99", "driver_pct", "cpu_ms", "busy_ms"}."""
    runs = {}
    for n, f in data_lines(path):
        if len(f) < 3:
            fail(path, n, "expected PEER SHARDS key=value...")
        try:
            shards = int(f[1])
        except ValueError:
            fail(path, n, f"shard count {f[1]!r} is not a number")
        if f[2] == "ERROR":
            runs.setdefault((f[0], shards), []).append(None)
            continue
        kv = key_values(path, n, f[2:])
        runs.setdefault((f[0], shards), []).append({
            "rps": number(path, n, kv, "rps"), "p99": number(path, n, kv, "p99_us"),
            "driver_pct": number(path, n, kv, "driver_pct"),
            "cpu_ms": number(path, n, kv, "server_cpu_ms", required=False, na_ok=True),
            "busy_ms": number(path, n, kv, "engine_busy_ms", required=False, na_ok=True)})
    return runs


IDLE_KINDS = ("connection", "session", "stream")


# ---------------------------------------------------------------------------------- helpers

def order_peers(names):
    """The usual peers in a fixed order (this library's first), then the others as first seen."""
    return [p for p in PEER_ORDER if p in names] + [p for p in names if p not in PEER_ORDER]


def peer_colour(peer):
    """A fixed colour per peer; unknown peers hash into the fallback palette, so an unknown
    peer keeps its colour across charts and runs too."""
    return PEER_COLOURS.get(peer) or FALLBACK[zlib.crc32(peer.encode()) % len(FALLBACK)]


def peer_opacity(peer):
    """null (the do-nothing ceiling) is drawn faded: a reference, not a competitor."""
    return ' fill-opacity="0.4"' if peer == "null" else ""


def sig3(x):
    """Three significant figures, which is all a chart can show."""
    if x == 0:
        return "0"
    return f"{x:.{max(0, 2 - math.floor(math.log10(abs(x))))}f}"


def trim(s):
    return s.rstrip("0").rstrip(".") if "." in s else s


def si(v, tick=False):
    """41234 -> '41.2k' (as a tick: 40000 -> '40k')."""
    fmt = trim if tick else str
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return fmt(sig3(v / div)) + suffix
    return fmt(sig3(v))


def micros(v, tick=False):
    fmt = trim if tick else str
    for div, unit in ((1e6, "s"), (1e3, "ms")):
        if v >= div:
            return f"{fmt(sig3(v / div))} {unit}"
    return f"{fmt(sig3(v))} µs"


def rounds_text(counts):
    lo, hi = min(counts, default=0), max(counts, default=0)
    return str(lo) if lo == hi else f"{lo}–{hi}"


def failed_text(failed):
    return f" · {failed} failed run{'s' * (failed != 1)} excluded" if failed else ""


def text_width(s, size):
    """A generous estimate of the rendered width: no font metrics without a font."""
    return 0.6 * size * len(s)


# ---------------------------------------------------------------------------------- drawing

def text(x, y, s, size=12, anchor="start", fill=INK, extra=""):
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{fill}"{extra}>{escape(s)}</text>')


def line(x1, y1, x2, y2, stroke=GRID, width=1, extra=""):
    return (f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
            f'stroke-width="{width}"{extra}/>')


def svg(title, subtitle, height, body):
    """The whole document: white background, title, one-line subtitle, then BODY."""
    head = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" font-family="{FONT}">',
            f"<title>{escape(title)}</title>",
            f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
            text(20, 30, title, 18, extra=' font-weight="600"'),
            text(20, 50, subtitle, 12, fill=MUTED)]
    return "\n".join(head + body + ["</svg>"]) + "\n"


def legend(peers, y):
    """Colour swatches in one row (wrapping if needed); returns the SVG and the next free y."""
    out, x = [], 20
    for peer in peers:
        w = 18 + text_width(peer, 12) + 14
        if x + w > WIDTH - 20:
            x, y = 20, y + 20
        out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" rx="2" '
                   f'fill="{peer_colour(peer)}"{peer_opacity(peer)}/>')
        out.append(text(x + 17, y, peer, 12))
        x += w
    return out, y + 22


class Axis:
    """A value axis LENGTH pixels long: linear from 0, or logarithmic over whole decades."""

    def __init__(self, lo, hi, length, log=False):
        self.length, self.log = length, log
        if log:
            d_lo, d_hi = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
            d_hi = max(d_hi, d_lo + 1)
            self.lo, self.hi = 10.0 ** d_lo, 10.0 ** d_hi
            steps = (1, 2, 5) if d_hi - d_lo <= 2 else (1,)  # 2s and 5s only when there is room
            self.ticks = [m * 10.0 ** d for d in range(d_lo, d_hi) for m in steps] + [self.hi]
        else:
            raw = max(hi, 1e-9) / 5
            mag = 10.0 ** math.floor(math.log10(raw))
            step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
            count = math.ceil(hi / step - 1e-9)
            self.lo, self.hi = 0.0, step * max(count, 1)
            self.ticks = [i * step for i in range(max(count, 1) + 1)]

    def __call__(self, v):
        if self.log:
            v = min(max(v, self.lo), self.hi)
            return self.length * math.log10(v / self.lo) / math.log10(self.hi / self.lo)
        return self.length * v / self.hi


@dataclass
class Bar:
    value: float | None  # None: no bar, only the label (a failed or unmeasured run)
    label: str
    lo: float | None = None  # a whisker from lo to hi (the spread over rounds), if given
    hi: float | None = None


def grouped_bars(title, subtitle, groups, caption, tick_fmt, log=False, refs=(), series=None):
    """Horizontal grouped bars: one band per group (a benchmark row), one bar per peer in it.

    GROUPS is [(label, {peer: Bar})]. Horizontal, because the group labels are long and there
    are many groups; each peer keeps its place in every group, so one can follow it down the
    chart. REFS are dashed vertical lines [(value, label)]; SERIES, when given, is the legend.
    """
    bar_h, slot, pad = 12, 14, 14
    bars = [b for _, g in groups for b in g.values()]
    left = 30 + max(text_width(label, 12) for label, _ in groups)
    right = 16 + max(text_width(b.label, 11) for b in bars)
    values = [v for b in bars for v in (b.value, b.hi, b.lo) if v is not None and v > 0]
    values = values + [v for v, _ in refs] or [1.0]
    axis = Axis(min(values), max(values), WIDTH - left - right, log)
    body, y = [], 64
    if series:
        swatches, y = legend(series, y + 12)
        body += swatches
    ticks_y = y + 10
    top = ticks_y + 8 + (16 if refs else 0)
    y = top
    for i, (label, group) in enumerate(groups):
        height = len(group) * slot + pad
        if i % 2:
            body.append(f'<rect x="10" y="{y:.1f}" width="{WIDTH - 20}" height="{height}" fill="#f9fafb"/>')
        body.append(text(left - 12, y + height / 2 + 4, label, 12, "end"))
        for j, (peer, bar) in enumerate(group.items()):
            body += draw_bar(peer, bar, axis, left, y + pad / 2 + j * slot, bar_h)
        y += height
    bottom = y
    for t in axis.ticks:
        x = left + axis(t)
        body.insert(0, line(x, top - (16 if refs else 0), x, bottom))
        body.append(text(x, ticks_y, tick_fmt(t), 11, "middle", MUTED))
        body.append(text(x, bottom + 15, tick_fmt(t), 11, "middle", MUTED))
    for k, (value, label) in enumerate(refs):
        x = left + axis(value)
        body.append(line(x, top - 16, x, bottom, "#374151", 1.2, ' stroke-dasharray="5 4"'))
        # Alternate sides of the line, so two close references do not print over each other.
        body.append(text(x + (4 if k % 2 else -4), top - 5, label, 11, "start" if k % 2 else "end"))
    body.append(text(left + axis.length / 2, bottom + 34, caption, 12, "middle", MUTED))
    return svg(title, subtitle, bottom + 50, body)


def draw_bar(peer, bar, axis, left, y, h):
    if bar.value is None:
        return [text(left + 4, y + h - 2, bar.label, 11, fill=FAILED)]
    w = max(axis(bar.value), 1.0)
    out = [f'<rect x="{left:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h}" '
           f'fill="{peer_colour(peer)}"{peer_opacity(peer)}/>']
    end = w
    if bar.lo is not None and bar.hi is not None and bar.hi > bar.lo:
        x1, x2, mid = left + axis(bar.lo), left + axis(bar.hi), y + h / 2
        out += [line(x1, mid, x2, mid, INK), line(x1, mid - 3, x1, mid + 3, INK),
                line(x2, mid - 3, x2, mid + 3, INK)]
        end = max(end, axis(bar.hi))
    out.append(text(left + end + 4, y + h - 2, bar.label, 11))
    return out


# ---------------------------------------------------------------------------------- charts

@dataclass
class Cell:
    """One peer in one (transport, load, conc) row: medians over the rounds that did not fail."""
    rounds: int
    failed: int
    rps: float | None = None
    rps_lo: float | None = None
    rps_hi: float | None = None
    p99: float | None = None
    rss_kb: float | None = None  # the largest peak over the rounds, not a median
    spread: float | None = None  # (max - min) / median of rps: how much to trust the median


def summarise(runs):
    ok = [r for r in runs if r is not None]
    cell = Cell(rounds=len(ok), failed=len(runs) - len(ok))
    if ok:
        rps = [r["rps"] for r in ok]
        cell.rps, cell.rps_lo, cell.rps_hi = statistics.median(rps), min(rps), max(rps)
        cell.p99 = statistics.median(r["p99"] for r in ok)
        cell.rss_kb = max((r["rss_kb"] for r in ok if r["rss_kb"] is not None), default=None)
        cell.spread = (cell.rps_hi - cell.rps_lo) / cell.rps if cell.rps else None
    return cell


def row_key(rows):
    """stdio before http (then other transports), loads as first seen, concurrency ascending."""
    transports = list(dict.fromkeys(r[0] for r in rows))
    loads = list(dict.fromkeys(r[1] for r in rows))
    known = len(TRANSPORT_ORDER)
    return lambda r: (TRANSPORT_ORDER.index(r[0]) if r[0] in TRANSPORT_ORDER
                      else known + transports.index(r[0]), loads.index(r[1]), r[2])


def matrix_charts(data):
    cells, seen = data
    peers = order_peers(seen)
    rows = sorted(cells, key=row_key(list(cells)))
    stats = {row: {p: summarise(cells[row][p]) for p in peers if p in cells[row]} for row in rows}
    everything = [c for row in rows for c in stats[row].values()]
    note = f"medians over {rounds_text([c.rounds for c in everything if c.rounds])} rounds" + \
        failed_text(sum(c.failed for c in everything))

    def groups(bar_of):
        return [(f"{t} {load} c={conc}", {p: bar_of(c, stats[(t, load, conc)]) if c.rounds
                                          else Bar(None, "failed") for p, c in stats[(t, load, conc)].items()})
                for t, load, conc in rows]

    yield "throughput.svg", grouped_bars(
        "Throughput", f"Requests per second per peer, higher is better · {note} · whiskers: min–max",
        groups(lambda c, _: Bar(c.rps, si(c.rps), c.rps_lo, c.rps_hi)), "requests/s", lambda v: si(v, True),
        series=peers)
    if "rmcp" in peers:
        def ratio(c, row):
            base = row.get("rmcp")
            if base is None or base.rps is None or base.rps <= 0:
                return Bar(None, "no rmcp")
            return Bar(c.rps / base.rps, f"{c.rps / base.rps:.2f}×")
        yield "throughput-ratio.svg", grouped_bars(
            "Throughput relative to rmcp", f"Each peer's median requests/s ÷ rmcp's in the same row · {note}",
            groups(ratio), "× rmcp's requests/s", lambda v: trim(f"{v:.2f}") + "×",
            refs=[(1.0, "rmcp = 1.0"), (1.25, "1.25×")], series=peers)
    yield "p99.svg", grouped_bars(
        "p99 latency (log scale)", f"99th-percentile latency per peer, lower is better · {note}",
        groups(lambda c, _: Bar(c.p99, micros(c.p99))), "p99 latency, log scale", lambda v: micros(v, True),
        log=True, series=peers)
    yield "rss.svg", rss_chart(rows, stats, peers)
    yield "summary.md", summary_table(rows, stats)


def summary_table(rows, stats):
    """Markdown: per row, this library's runtimes against rmcp, null and each other."""
    def rps(row, peer):
        c = stats[row].get(peer)
        return c.rps if c is not None and c.rps else None

    def ratio(a, b, fmt="{:.2f}×"):
        return fmt.format(a / b) if a and b else "–"

    def p99(row, peer):
        c = stats[row].get(peer)
        return trim(sig3(c.p99)) if c is not None and c.p99 is not None else "–"

    def rss(row, peer):
        c = stats[row].get(peer)
        return f"{c.rss_kb / 1024:.1f}" if c is not None and c.rss_kb else "–"

    out = ["| row | tokio / rmcp | smol / rmcp | tokio / null | smol / null | smol / tokio "
           "| p99 µs tokio · smol · rmcp | peak RSS MiB tokio · smol · everything · rmcp |",
           "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        t, load, conc = row
        tk, sm, rm, nu = (rps(row, p) for p in ("tokio", "smol", "rmcp", "null"))
        out.append(f"| {t} {load} c={conc} | {ratio(tk, rm)} | {ratio(sm, rm)} | {ratio(tk, nu, '{:.0%}')} "
                   f"| {ratio(sm, nu, '{:.0%}')} | {ratio(sm, tk, '{:.0%}')} "
                   f"| {p99(row, 'tokio')} · {p99(row, 'smol')} · {p99(row, 'rmcp')} "
                   f"| {rss(row, 'tokio')} · {rss(row, 'smol')} · {rss(row, 'everything')} · {rss(row, 'rmcp')} |")
    return "\n".join(out) + "\n"


def rss_chart(rows, stats, peers):
    """Peak RSS by transport (the largest over its rows): memory hardly depends on the load."""
    transports = list(dict.fromkeys(r[0] for r in rows))
    groups, runs = [], []
    for t in transports:
        cells = {p: [stats[r][p] for r in rows if r[0] == t and p in stats[r]] for p in peers}
        bars = {}
        for p, cs in cells.items():
            if cs:
                peak = max((c.rss_kb for c in cs if c.rss_kb is not None), default=None)
                bars[p] = Bar(peak / 1024, f"{peak / 1024:.1f} MiB") if peak else Bar(None, "n/a")
                runs.append(sum(c.rounds for c in cs))
        groups.append((t, bars))
    return grouped_bars(
        "Server peak memory", f"Largest peak RSS over all rows and rounds of each transport "
        f"({rounds_text(runs)} runs per peer), not a median · lower is better", groups,
        "peak RSS (MiB)", lambda v: trim(sig3(v)), series=peers)


def startup_charts(runs):
    peers = order_peers(list(runs))
    med = {p: statistics.median([m for m in runs[p] if m is not None]) for p in peers if any(
        m is not None for m in runs[p])}
    groups = [(p, {p: Bar(med[p], f"{sig3(med[p])} ms") if p in med else Bar(None, "failed")}) for p in peers]
    # Interpreters start two orders of magnitude slower than a native binary; on a linear scale
    # the native bars would vanish, so a wide spread switches to a (labelled) log scale.
    log = len(med) > 1 and max(med.values()) > 20 * min(med.values()) > 0
    ok = [sum(m is not None for m in runs[p]) for p in peers]
    failed = sum(len(runs[p]) for p in peers) - sum(ok)
    yield "startup.svg", grouped_bars(
        "Startup time" + (" (log scale)" if log else ""), f"Milliseconds from exec to the first answered "
        f"initialize over stdio, medians over {rounds_text(ok)} runs{failed_text(failed)}", groups,
        "milliseconds" + (", log scale" if log else ""), lambda v: trim(sig3(v)), log=log)


def soak_charts(samples):
    """RSS (left axis) and, when measured, requests/s (right axis) against minutes."""
    left, right, top, bottom, height = 70, 76, 96, 360, 420
    has_rps = any(s["rps"] is not None for s in samples)
    xs = [s["t_s"] / 60 for s in samples]
    mib = [s["rss_kb"] / 1024 for s in samples]
    x_axis = Axis(0, max(max(xs), 1e-3), WIDTH - left - right)
    y_axis = Axis(0, max(mib), bottom - top)
    body = [line(left, bottom, WIDTH - right, bottom, MUTED)]
    for t in x_axis.ticks:
        x = left + x_axis(t)
        body += [line(x, top, x, bottom), text(x, bottom + 16, trim(sig3(t)), 11, "middle", MUTED)]
    for t in y_axis.ticks:
        y = bottom - y_axis(t)
        body += [line(left, y, WIDTH - right, y), text(left - 6, y + 4, trim(sig3(t)), 11, "end", MUTED)]
    body.append(text(left + x_axis.length / 2, bottom + 36, "minutes", 12, "middle", MUTED))
    body.append(text(18, (top + bottom) / 2, "RSS (MiB)", 12, "middle", MUTED,
                     f' transform="rotate(-90 18 {(top + bottom) / 2:.1f})"'))
    keys = [("RSS (MiB, left axis)", "#0f766e", "")]
    body.append(polyline(xs, mib, x_axis, y_axis, left, bottom, "#0f766e", 2))
    if has_rps:
        pts = [(x, s["rps"]) for x, s in zip(xs, samples) if s["rps"] is not None]
        r_axis = Axis(0, max(v for _, v in pts), bottom - top)
        for t in r_axis.ticks:
            body.append(text(WIDTH - right + 6, bottom - r_axis(t) + 4, si(t, True), 11, "start", MUTED))
        x_r = WIDTH - 16
        body.append(text(x_r, (top + bottom) / 2, "requests/s", 12, "middle", MUTED,
                         f' transform="rotate(-90 {x_r} {(top + bottom) / 2:.1f})"'))
        body.insert(1, polyline(*zip(*pts), x_axis, r_axis, left, bottom, "#9ca3af", 1.5, ' stroke-dasharray="4 3"'))
        keys.append(("requests/s (right axis)", "#9ca3af", ' stroke-dasharray="4 3"'))
    x = left
    for label, colour, dash in keys:
        body += [line(x, 77, x + 24, 77, colour, 2, dash), text(x + 30, 81, label, 12)]
        x += 50 + text_width(label, 12)
    extra = [f"{k}={sig3(samples[-1][k])}" for k in ("sessions", "streams", "tasks") if samples[-1][k] is not None]
    note = f"RSS {mib[0]:.1f} MiB at the start, {mib[-1]:.1f} MiB at the end, {max(mib):.1f} MiB at most"
    body.append(text(left, height - 14, note + (" · last sample: " + " ".join(extra) if extra else ""), 11, fill=MUTED))
    minutes = xs[-1] - xs[0]
    yield "soak.svg", svg("Soak: memory over time", f"Server resident memory during {trim(sig3(minutes))} min "
                          f"of load · one run, {len(samples)} samples (no medians)", height, body)


def idle_charts(idle):
    peers = order_peers(list(idle))
    labels = {"connection": "idle connection", "session": "idle legacy session", "stream": "idle GET stream"}

    def bar(v):
        return Bar(None, "failed") if v is None else Bar(v / 1024, f"{sig3(v / 1024)} KiB")
    groups = [(labels[k], {p: bar(idle[p][k]) for p in peers}) for k in IDLE_KINDS]
    yield "idle.svg", grouped_bars(
        "Memory per idle connection, session and stream", "Growth of the server's resident set with N "
        "idle ones (N in idle.txt), divided by N · one run · lower is better", groups,
        "KiB each", lambda v: trim(sig3(v)), series=peers)


def shard_charts(runs):
    peers = order_peers(list(dict.fromkeys(p for p, _ in runs)))
    counts = sorted({n for _, n in runs})
    groups = []
    for n in counts:
        bars = {}
        for p in peers:
            ok = [r for r in runs.get((p, n), []) if r is not None]
            if (p, n) not in runs:
                continue
            if not ok:
                bars[p] = Bar(None, "failed")
                continue
            rps = [r["rps"] for r in ok]
            driver = statistics.median(r["driver_pct"] for r in ok)
            bars[p] = Bar(statistics.median(rps), f"{si(statistics.median(rps))} · busiest driver "
                          f"{driver:.0f}% of a core", min(rps), max(rps))
        groups.append((f"{n} shard" + ("s" if n != 1 else ""), bars))
    rounds = [len(v) for v in runs.values()]
    yield "shards.svg", grouped_bars(
        "Throughput by shard count", f"HTTP requests/s with 1, 2, … engines (--shards), server and load "
        f"generator pinned as in shards.txt · medians over {rounds_text(rounds)} rounds · whiskers: min–max",
        groups, "requests/s", lambda v: si(v, True), series=peers)


def polyline(xs, ys, x_axis, y_axis, left, bottom, colour, width, extra=""):
    points = " ".join(f"{left + x_axis(x):.1f},{bottom - y_axis(y):.1f}" for x, y in zip(xs, ys))
    return (f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="{width}" '
            f'stroke-linejoin="round"{extra}/>')


# ---------------------------------------------------------------------------------- main

INPUTS = [("matrix.txt", read_matrix, matrix_charts), ("soak.txt", read_soak, soak_charts),
          ("startup.txt", read_startup, startup_charts), ("idle.txt", read_idle, idle_charts),
          ("shards.txt", read_shards, shard_charts)]


def main(argv):
    if len(argv) > 3 or any(a in ("-h", "--help") for a in argv[1:]):
        print(__doc__.strip(), file=sys.stderr)
        return 0 if len(argv) <= 3 else 2
    data_dir = Path(argv[1]) if len(argv) > 1 else ROOT / "docs/bench/data"
    out_dir = Path(argv[2]) if len(argv) > 2 else ROOT / "docs/bench"
    if not data_dir.is_dir():
        print(f"charts.py: error: no data directory {data_dir}", file=sys.stderr)
        return 1
    parsed = []  # everything is parsed before anything is written: a bad file leaves no half-update
    try:
        for name, read, draw in INPUTS:
            path = data_dir / name
            if not path.exists():
                print(f"charts.py: no {path}, skipping its charts", file=sys.stderr)
                continue
            data = read(path)
            if not data or (name == "matrix.txt" and not data[0]):
                print(f"charts.py: {path} has no data lines, skipping its charts", file=sys.stderr)
                continue
            parsed.append((data, draw))
    except (InputError, OSError, UnicodeDecodeError) as e:
        print(f"charts.py: error: {e}", file=sys.stderr)
        return 1
    out_dir.mkdir(parents=True, exist_ok=True)
    for data, draw in parsed:
        for name, content in draw(data):
            (out_dir / name).write_text(content, encoding="utf-8", newline="\n")
            print(out_dir / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
