#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""demo-report.py -- demo.sh's summaries of kv-ycsb's JSON files (Python's standard library
and gnuplot only).

usage: demo-report.py line FILE.json
       demo-report.py summary DIR [PNG]

line: one run in one line (throughput and p50 per operation, the check).

summary: the runs in DIR, named SERIES-RUN.json (loco-auto-1.json, loco-tcp-2.json,
memcached-3.json, ...): per series and operation the median and the range (min-max) of
throughput, p50 and p99 over the runs; the LOCO / memcached ratios of the medians; and,
with PNG, one chart (gnuplot): throughput of reads and updates on one log scale, and the
p50 / p99 / p99.9 latencies, every series side by side, a bar the median and a whisker the
range. Exit 0; 1 when a run lost or corrupted acknowledged writes, or gnuplot failed.
"""
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

OPS = ("read", "update")
PCTS = (("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9"))
COLORS = ("#1f5fa8", "#7fb2e5", "#e8812c", "#6a9a3a", "#9a5aa8")


def load(path):
    with open(path) as f:
        return json.load(f)


def line(path):
    d = load(path)
    parts = []
    for op in OPS:
        if op in d["ops"]:
            o = d["ops"][op]
            parts.append("%s %.0f ops/s p50 %s us" % (op, o["ops_per_s"], lat(o["p50_us"])))
    c = d.get("check")
    check = "" if c is None else "; check: %d lost, %d corrupt" % (c["lost"], c["corrupt"])
    print(", ".join(parts) + check)
    return 0 if c is None or (c["lost"] == 0 and c["corrupt"] == 0) else 1


def lat(v):
    return "%.1f" % v if v < 100 else "%.0f" % v


def series_label(name, docs):
    """loco-auto -> "LOCO on shm (auto)"; loco-tcp -> "LOCO on tcp"; memcached -> "memcached"."""
    fabs = sorted({d.get("fabric", "?") for d in docs})
    fab = "+".join(fabs)
    if name.startswith("loco-"):
        setting = name[len("loco-"):]
        return "LOCO on %s%s" % (fab, "" if setting == fab else " (%s)" % setting)
    return "%s on %s" % (name, fab)


def collect(directory):
    """{series: [doc, ...]} in the order loco-auto, other loco-*, memcached, others."""
    runs = {}
    for f in sorted(os.listdir(directory)):
        m = re.fullmatch(r"(.+)-(\d+)\.json", f)
        if m:
            runs.setdefault(m.group(1), []).append((int(m.group(2)), load(os.path.join(directory, f))))
    order = sorted(runs, key=lambda s: (s != "loco-auto", not s.startswith("loco-"), s != "memcached", s))
    return {s: [d for _, d in sorted(runs[s], key=lambda x: x[0])] for s in order}


def stat(values):
    return statistics.median(values), min(values), max(values)


def fmt_range(t, f):
    return "%s (%s-%s)" % (f(t[0]), f(t[1]), f(t[2]))


def summary(directory, png):
    runs = collect(directory)
    if not runs:
        print("demo-report: no SERIES-RUN.json in %s" % directory, file=sys.stderr)
        return 1
    first = next(iter(runs.values()))[0]
    nruns = sorted({len(v) for v in runs.values()})
    labels = {s: series_label(s, docs) for s, docs in runs.items()}
    # per series, op: stats of ops/s and each percentile
    st = {}
    for s, docs in runs.items():
        for op in OPS + ("total",):
            if op == "total":
                vals = [sum(d["ops"][o]["ops_per_s"] for o in OPS if o in d["ops"]) for d in docs]
                st[s, op] = {"ops_per_s": stat(vals)}
                continue
            if not all(op in d["ops"] for d in docs):
                continue
            st[s, op] = {k: stat([d["ops"][op][k] for d in docs]) for k in ("ops_per_s",) + tuple(p for p, _ in PCTS)}
    width = max(len(v) for v in labels.values()) + 2
    print("== Summary: workload %s (%s keys), %d records of %d B, %d client threads, %.0f s runs;"
          % (first["workload"], first["dist"], first["records"], first["value_size"], first["threads"],
             first["secs"]))
    print("   median (min-max) of %s run(s) each" % "/".join(str(n) for n in nruns))
    print("%-*s %-7s %-30s %-22s %s" % (width, "system", "op", "ops/s", "p50 us", "p99 us"))
    for s in runs:
        for op in OPS + ("total",):
            if (s, op) not in st:
                continue
            r = st[s, op]
            tput = fmt_range(r["ops_per_s"], lambda v: "%.0f" % v)
            if op == "total":
                print("%-*s %-7s %s" % (width, labels[s], op, tput))
            else:
                print("%-*s %-7s %-30s %-22s %s" % (width, labels[s], op, tput, fmt_range(r["p50_us"], lat),
                                                    fmt_range(r["p99_us"], lat)))
    bad = 0
    for s, docs in runs.items():
        for i, d in enumerate(docs):
            c = d.get("check")
            errs = sum(o.get("errors", 0) for o in d["ops"].values())
            if (c and (c["lost"] or c["corrupt"])) or errs:
                print("!! %s run %d: %d errors%s" % (labels[s], i + 1, errs, "" if not c else
                      ", %d lost, %d corrupt acknowledged writes" % (c["lost"], c["corrupt"])))
                bad = 1
    base = next((s for s in runs if s == "memcached"), None)
    if base is not None:
        print()
        print("== LOCO / memcached, medians (ops/s: above 1 LOCO serves more; p50: below 1 LOCO answers sooner)")
        print("%-*s %-7s %10s %10s" % (width, "system", "op", "ops/s", "p50"))
        for s in runs:
            if s == base:
                continue
            for op in OPS + ("total",):
                if (s, op) not in st or (base, op) not in st:
                    continue
                a, b = st[s, op], st[base, op]
                r = "%9.2fx" % (a["ops_per_s"][0] / b["ops_per_s"][0])
                p = "" if op == "total" else "%9.2fx" % (a["p50_us"][0] / b["p50_us"][0])
                print("%-*s %-7s %10s %10s" % (width, labels[s], op, r, p))
    if png:
        if plot(png, runs, labels, st, first, nruns):
            bad = 1
        else:
            print("\nthe chart: %s" % png)
    return bad


def plot(png, runs, labels, st, first, nruns):
    """one PNG, two panels: throughput (reads, updates; one log scale), latency percentiles."""
    series = list(runs)
    n = len(series)
    w = 0.8 / n
    tmp = tempfile.mkdtemp(prefix="kv-demo-plot-")
    try:
        files = {}
        for panel, cats in (("tput", [(op, op, "ops_per_s") for op in OPS]),
                            ("lat", [(op, "%s %s" % (op, name), key) for op in OPS for key, name in PCTS])):
            for j, s in enumerate(series):
                path = os.path.join(tmp, "%s-%d.dat" % (panel, j))
                with open(path, "w") as f:
                    for c, (op, _, key) in enumerate(cats):
                        if (s, op) not in st:
                            continue
                        med, lo, hi = st[s, op][key]
                        x = c + (j - (n - 1) / 2) * w
                        label = ("%.0fk" % (med / 1000) if med >= 10000 else "%.0f" % med) if panel == "tput" \
                            else lat(med)
                        f.write("%f %f %f %f \"%s\"\n" % (x, med, lo, hi, label))
                files[panel, j] = path
            files[panel] = cats

        def bars(panel, lowest):
            parts = []
            for j, s in enumerate(series):
                p = files[panel, j]
                parts.append("'%s' using 1:2:($1-%f):($1+%f):(%g):2 with boxxyerror fs solid 0.85 "
                             "lc rgb '%s' title '%s'" % (p, w / 2, w / 2, lowest, COLORS[j % len(COLORS)], labels[s]))
                parts.append("'%s' using 1:3:(0):($4-$3) with vectors heads size screen 0.004,90 "
                             "lc rgb 'black' lw 1.2 notitle" % p)
                parts.append("'%s' using 1:4:5 with labels offset 0,0.7 font ',9' notitle" % p)
            return ", \\\n  ".join(parts)

        def rng(key_fn):
            """a log range from the decade below the smallest value to 4 x the largest"""
            vals = [v for (s, op), r in st.items() if op in OPS for v in key_fn(r) if v > 0]
            return 10 ** math.floor(math.log10(min(vals))), max(vals) * 4

        tlo, thi = rng(lambda r: r["ops_per_s"])
        llo, lhi = rng(lambda r: [x for k, _ in PCTS for x in r[k]])
        gp = os.path.join(tmp, "plot.gp")
        xt = lambda cats: ", ".join("'%s' %d" % (name, c) for c, (_, name, _) in enumerate(cats))
        with open(gp, "w") as f:
            f.write("""set terminal pngcairo size 1500,620 font ',11'
set output '%(png)s'
set multiplot layout 1,2 title "%(title)s" font ',13'
set style fill solid 0.85 border lc rgb '#404040'
set grid ytics mytics lc rgb '#d0d0d0'
set bmargin 5
set logscale y
set format y '10^{%%L}'
set title 'Throughput, operations/s (one log scale)'
set key at screen 0.5, 0.025 center horizontal font ',11' samplen 2 width 2
set xtics (%(xt_t)s)
set xrange [-0.6:%(xmax_t)f]
set yrange [%(tlo)g:%(thi)g]
plot %(bars_t)s
set title 'Latency percentiles, microseconds (log scale)'
unset key
set xtics (%(xt_l)s)
set xrange [-0.6:%(xmax_l)f]
set yrange [%(llo)g:%(lhi)g]
plot %(bars_l)s
unset multiplot
""" % {"png": png,
       "title": "kv-ycsb workload %s, %d records of %d B, %d client threads, %.0f s runs: bar = median "
                "of %s run(s), whisker = min-max" % (first["workload"], first["records"], first["value_size"],
                                                   first["threads"], first["secs"],
                                                   "/".join(str(x) for x in nruns)),
       "xt_t": xt(files["tput"]), "xmax_t": len(files["tput"]) - 0.4, "tlo": tlo, "thi": thi,
       "bars_t": bars("tput", tlo),
       "xt_l": xt(files["lat"]), "xmax_l": len(files["lat"]) - 0.4, "llo": llo, "lhi": lhi,
       "bars_l": bars("lat", llo)})
        r = subprocess.run(["gnuplot", gp], capture_output=True, text=True)
        if r.returncode != 0:
            print("demo-report: gnuplot failed (is gnuplot-nox installed?): %s" % r.stderr.strip(),
                  file=sys.stderr)
            return 1
        return 0
    finally:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


def main(argv):
    if len(argv) == 3 and argv[1] == "line":
        return line(argv[2])
    if len(argv) in (3, 4) and argv[1] == "summary":
        return summary(argv[2], argv[3] if len(argv) == 4 else None)
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
