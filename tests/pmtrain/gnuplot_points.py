"""What the plot tests read back from a pmtrain plot: the PNG's header and the points gnuplot plotted.

pmtrain draws each PNG and has gnuplot write the same plot's points as a `set table` file
(NAME.points.txt: '# Curve title: "T"' then 'x y type' rows); the tests compare those points with the
CSV / metrics.jsonl they parse on their own. Shared by plot.sh and sweep.sh.
"""
import re
import struct
import sys


def fail(msg):
    sys.exit("FAIL: " + msg)


def check_png(path, min_bytes=5000, min_w=400, min_h=300):
    """Fails unless PATH is a PNG (signature, IHDR) of at least MIN_W x MIN_H pixels and MIN_BYTES bytes."""
    png = open(path, "rb").read()
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        fail(f"{path} is not a PNG")
    w, h = struct.unpack(">II", png[16:24])
    if len(png) < min_bytes or w < min_w or h < min_h:
        fail(f"{path}: {len(png)} bytes, {w}x{h}")


def read_points(path):
    """{curve title: [(x, y), ...]} in the order gnuplot plotted them."""
    plotted, title = {}, None
    for line in open(path):
        m = re.match(r'# Curve title: "(.*)"', line)
        if m:
            title = m.group(1)
            plotted[title] = []
            continue
        f = line.split()
        if len(f) == 3 and not line.startswith("#"):
            plotted[title].append((float(f[0]), float(f[1])))
    return plotted


def check_points(what, plotted, expected, source):
    """Fails unless the curves of PLOTTED are EXPECTED's ({title: [(x, y)]}, x ascending), y to 1e-9."""
    if sorted(plotted) != sorted(expected):
        fail(f"{what}: plotted curves {sorted(plotted)}, {source} has {sorted(expected)}")
    for t, pts in expected.items():
        got = plotted[t]
        if len(got) != len(pts) or any(
            a[0] != b[0] or abs(a[1] - b[1]) > 1e-9 * max(abs(b[1]), 1e-300) for a, b in zip(got, pts)
        ):
            fail(f"{what} {t}: plotted {got}, {source} {pts}")
