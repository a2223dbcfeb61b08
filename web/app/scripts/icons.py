#!/usr/bin/env python3
"""Draw the app's PNG icons (192 and 512, "any" and "maskable") into public/icons/.

No image library: each pixel is computed (a speech bubble on a blue tile, 4x4
supersampled) and written with zlib. The "any" icons are a rounded tile; the maskable
ones fill the square and keep the bubble inside the 80 % safe zone.
Run: python3 web/app/scripts/icons.py"""
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, '..', 'public', 'icons')
BLUE = (29, 78, 216)
WHITE = (255, 255, 255)


def inside_round_rect(x, y, x0, y0, x1, y1, r):
    """Whether (x, y) is inside the rectangle with corners rounded by r."""
    if x < x0 or x > x1 or y < y0 or y > y1:
        return False
    cx = min(max(x, x0 + r), x1 - r)
    cy = min(max(y, y0 + r), y1 - r)
    return (x - cx) ** 2 + (y - cy) ** 2 <= r * r


def shape(x, y, maskable):
    """The colour (r, g, b, a) at (x, y) in a unit square."""
    if maskable:
        tile = True
        s, o = 0.62, 0.19  # the bubble scaled into the safe zone
    else:
        tile = inside_round_rect(x, y, 0.0, 0.0, 1.0, 1.0, 0.22)
        s, o = 0.74, 0.13
    if not tile:
        return (0, 0, 0, 0)
    u, v = (x - o) / s, (y - o) / s  # bubble coordinates, 0..1
    bubble = inside_round_rect(u, v, 0.08, 0.12, 0.92, 0.72, 0.16)
    # The tail: a triangle under the bubble's left side.
    tail = 0.72 <= v <= 0.92 and 0.22 <= u <= 0.22 + (0.92 - v) * 1.1
    if bubble or tail:
        for cx in (0.32, 0.5, 0.68):  # three dots: a reply being typed
            if (u - cx) ** 2 + (v - 0.42) ** 2 <= 0.065 ** 2:
                return BLUE + (255,)
        return WHITE + (255,)
    return BLUE + (255,)


def png(size, maskable):
    rows = []
    n = 4
    for py in range(size):
        row = bytearray([0])
        for px in range(size):
            acc = [0, 0, 0, 0]
            for sy in range(n):
                for sx in range(n):
                    c = shape((px + (sx + 0.5) / n) / size, (py + (sy + 0.5) / n) / size, maskable)
                    for i in range(3):
                        acc[i] += c[i] * c[3]
                    acc[3] += c[3]
            a = acc[3] / (n * n)
            rgb = [round(acc[i] / acc[3]) if acc[3] else 0 for i in range(3)]
            row += bytes(rgb + [round(a)])
        rows.append(bytes(row))
    raw = zlib.compress(b''.join(rows), 9)

    def chunk(kind, data):
        return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack('>IIBBBBB', size, size, 8, 6, 0, 0, 0)
    return b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', header) + chunk(b'IDAT', raw) + chunk(b'IEND', b'')


os.makedirs(OUT, exist_ok=True)
for size in (192, 512):
    for maskable in (False, True):
        name = f"{'maskable' if maskable else 'icon'}-{size}.png"
        with open(os.path.join(OUT, name), 'wb') as f:
            f.write(png(size, maskable))
        print(name)
