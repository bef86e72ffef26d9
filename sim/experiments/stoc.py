"""Experiment: how many any-hit shaders and alpha tests sub-triangle opacity data removes.

A foliage volume is built in code from textured leaf cards (a quad = two triangles, each card
type with its own procedural binary alpha texture: leaves, grass blades, a chain-link fence).
Every triangle's alpha is baked conservatively into micro-triangle states (a micro-triangle is
transparent / opaque only if every texel it touches is; otherwise unknown, unknown-opaque when
most of its texels are opaque) at levels 1 to 6. Parallel shadow rays cross the volume; each ray
walks its candidate hits front to back and stops at the first opaque one (accept-first-hit
shadow rays). Per scheme the golden `stoc` model classifies every candidate:

* ``none``: no opacity data, every candidate runs the any-hit shader (one alpha test each);
* ``STOC1``: Xe3 64-byte leaf, level-1 planes in DW3 (IGC ``RTStackFormat.h`` ``QuadLeaf<Xe3>``);
* ``STOC3``: Xe3 128-byte leaf, inline level-3 planes (``QuadLeaf_STOC3``); ``STOC3+SW6``: the same
  with the swstoc flag and level-6 full-resolution states that the any-hit shader reads
  (``MemHit.needSWSTOC``);
* ``OMM L``: 4-state opacity micromaps at levels 1..6 (Vulkan ``VK_EXT_opacity_micromap``);
  ``OMM2 6``: a 2-state map at level 6 (lossy: reports how many candidates get a different answer
  than the alpha test).

Counted: any-hit invocations and alpha tests (texture reads), the share of the baseline's alpha
tests skipped (the source paper, Gruen, Benthin and Woop, "Sub-triangle opacity masks for faster ray
tracing of transparent objects", HPG 2020, reports up to 86 %), the shadow result of every ray (must
not change for the conservative schemes), and the memory each scheme costs per triangle. The RTL of
the `stoc` block (Amaranth simulator) replays a sample of the lookups and is compared with the
golden model.
"""

import time

import numpy as np

from ..tools.tables import Column, document, markdown, metrics, write_csv
from . import check_params

#: The seeds of the cards of the scene and the RTL replay sample, and of the grass texture.
SEEDS = {"scene and RTL replay": 2020, "grass texture": 7}

NAME = "stoc"
DESCRIPTION = (
    "sub-triangle opacity (Xe3 STOC1/STOC3, opacity micromaps L1-6): any-hit "
    "invocations and alpha tests skipped on alpha-tested foliage, memory per scheme"
)

__all__ = ["NAME", "DESCRIPTION", "measure", "report", "make_texture", "bake_states", "CARD_UV"]

# triangle corner UVs of a card (V0, V1, V2 per triangle); u = weight of V1, v = weight of V2
CARD_UV = np.array([[[0, 0], [1, 0], [0, 1]], [[1, 1], [0, 1], [1, 0]]], dtype=np.float64)
VARIANTS = ("leaves", "grass", "fence")
T_, O_, UT_, UO_ = 0, 1, 2, 3


def make_texture(kind, res):
    """Binary alpha texture (res x res, [s, t] indexing, 1 = opaque) of a card type."""
    s, t = np.meshgrid((np.arange(res) + 0.5) / res, (np.arange(res) + 0.5) / res, indexing="ij")
    if kind == "leaves":
        alpha = np.zeros_like(s, dtype=bool)
        base = np.array([0.5, 0.06])
        alpha |= (np.abs(s - 0.5) < 0.012) & (t < 0.55)  # stem
        for k, angle in enumerate(np.radians([-70, -35, 0, 35, 70, -15, 20])):
            length = 0.30 if k < 5 else 0.22
            d = np.array([np.sin(angle), np.cos(angle)])
            root = base + (0.12 if k < 5 else 0.38) * np.array([0, 1])
            center = root + d * length
            x, y = s - center[0], t - center[1]
            along, across = x * d[0] + y * d[1], -x * d[1] + y * d[0]
            width = 0.085 * (1 + 0.15 * np.sin(40 * along))  # serrated edge
            alpha |= (along / length) ** 2 + (across / width) ** 2 < 1
    elif kind == "grass":
        alpha = np.zeros_like(s, dtype=bool)
        rng = np.random.default_rng(7)
        for x0, h, w, bend in zip(
            np.linspace(0.08, 0.92, 9),
            rng.uniform(0.55, 0.95, 9),
            rng.uniform(0.025, 0.045, 9),
            rng.uniform(-0.25, 0.25, 9),
        ):
            x = x0 + bend * t**2
            alpha |= (t < h) & (np.abs(s - x) < w * (1 - t / h))
    elif kind == "fence":
        a, b = (s + t) * 6, (s - t) * 6

        def wire(z):
            return np.abs(z - np.round(z)) < 0.07

        alpha = wire(a) | wire(b) | (s < 0.03) | (s > 0.97)
    else:
        raise ValueError(f"unknown card type {kind!r}")
    return alpha.astype(np.uint8)


def _micro_triangles(level):
    """Corners (4**level, 3, 2) of every micro-triangle in curve order, in units of 2**-level
    (the child rule of the Vulkan micromap curve)."""
    n = 1 << level
    tris = np.array([[[0, 0], [n, 0], [0, n]]], dtype=np.int64)
    for _ in range(level):
        p0, p1, p2 = tris[:, 0], tris[:, 1], tris[:, 2]
        m01, m12, m20 = (p0 + p1) // 2, (p1 + p2) // 2, (p2 + p0) // 2
        tris = np.stack(
            [
                np.stack([p0, m01, m20], 1),
                np.stack([m20, m12, m01], 1),
                np.stack([m01, p1, m12], 1),
                np.stack([m12, m20, p2], 1),
            ],
            1,
        ).reshape(-1, 3, 2)
    return tris


def bake_states(alpha, tri_uv, level, margin=1e-4):
    """Conservative 4-state value of every micro-triangle of one triangle at ``level``.

    A micro-triangle (dilated by ``margin`` in UV) is tested against every texel square it may
    touch with the separating-axis test; states: T / O when all touched texels agree, else UO if
    at least half of them are opaque, UT otherwise.
    """
    res = alpha.shape[0]
    n = 1 << level
    micro = _micro_triangles(level) / n  # barycentric (u, v) corners
    w = 1 - micro[..., 0] - micro[..., 1]
    uv = (
        w[..., None] * tri_uv[0] + micro[..., 0:1] * tri_uv[1] + micro[..., 1:2] * tri_uv[2]
    ) * res  # texel units
    pad = margin * res
    lo = np.clip(np.floor(uv.min(1) - pad).astype(np.int64), 0, res - 1)  # (m, 2)
    hi = np.clip(np.floor(uv.max(1) + pad).astype(np.int64), 0, res - 1)
    span = int((hi - lo).max()) + 1
    off = np.arange(span)
    xs = lo[:, 0, None, None] + off[None, :, None]  # (m, span, 1)
    ys = lo[:, 1, None, None] + off[None, None, :]  # (m, 1, span)
    xs, ys = np.broadcast_arrays(xs, ys)
    touch = (xs <= hi[:, 0, None, None]) & (ys <= hi[:, 1, None, None])
    for e in range(3):  # separating axes: the 3 edge normals (x, y: the bbox)
        a, b, c = uv[:, e], uv[:, (e + 1) % 3], uv[:, (e + 2) % 3]
        normal = np.stack([b[:, 1] - a[:, 1], a[:, 0] - b[:, 0]], 1)  # (m, 2)
        side = np.sign(np.einsum("mk,mk->m", normal, c - a))[:, None, None]
        base = np.einsum("mk,mk->m", normal, a)[:, None, None]
        nx, ny = normal[:, 0, None, None], normal[:, 1, None, None]
        proj = [(xs + dx) * nx + (ys + dy) * ny - base for dx in (0, 1) for dy in (0, 1)]
        reach = np.maximum.reduce([side * q for q in proj])  # farthest corner on the inside
        touch &= reach >= -pad * np.hypot(nx, ny)
    texels = alpha[np.minimum(xs, res - 1), np.minimum(ys, res - 1)].astype(np.int64)
    count = touch.sum((1, 2))
    opaque = (texels * touch).sum((1, 2))
    states = np.where(
        opaque == count, O_, np.where(opaque == 0, T_, np.where(2 * opaque >= count, UO_, UT_))
    )
    return states


def pack_states(states, bits):
    """Micromap data bytes of a state array (``bits`` = 1 or 2 per state, LSB first, as in Vulkan
    micromaps), padded to whole 32-bit words."""
    count = len(states)
    words = np.zeros(max(1, (count * bits + 31) // 32), dtype=np.uint32)
    for i, st in enumerate(states):
        words[(i * bits) // 32] |= np.uint32(int(st) << ((i * bits) % 32))
    return words


def _planes(states, coarse_level):
    """(opaque plane, transparent plane) ints of states at ``coarse_level`` (bit i = index i;
    unknown-opaque -> both bits, the block's default ``both_planes="uo"``)."""
    o = t = 0
    for i, st in enumerate(states):
        if st in (O_, UO_):
            o |= 1 << i
        if st in (T_, UO_):
            t |= 1 << i
    return o, t


def _scene(rng, count, extent=10.0):
    variant = rng.integers(0, len(VARIANTS), count)
    center = rng.uniform(0, extent, (count, 3))
    q = rng.normal(size=(count, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w, x, y, z = q.T
    axis1 = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)], 1)
    axis2 = np.stack([2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)], 1)
    size = rng.uniform(1.2, 2.4, count)[:, None]
    # world corners of each card's two triangles: (count, 2, 3, 3)
    uvs = CARD_UV - 0.5
    verts = center[:, None, None, :] + size[:, None, None, :] * (
        uvs[None, ..., 0:1] * axis1[:, None, None, :]
        + uvs[None, ..., 1:2] * axis2[:, None, None, :]
    )
    return variant, verts.astype(np.float32)


def _intersect(verts, origins, direction):
    """FP32 Moller-Trumbore of parallel rays against every triangle: hit list (ray, card, tri,
    t, u_bits, v_bits)."""
    d = direction.astype(np.float32)
    out = []
    for card in range(verts.shape[0]):
        for tri in range(2):
            v0, v1, v2 = verts[card, tri]
            e1, e2 = v1 - v0, v2 - v0
            p = np.cross(d, e2)
            det = np.float32(e1 @ p)
            if abs(det) < 1e-8:
                continue
            inv = np.float32(1) / det
            s = origins - v0
            u = (s @ p) * inv
            qv = np.cross(s, e1)
            v = (qv @ d) * inv
            t = (qv @ e2) * inv
            hit = (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 0)
            rays = np.nonzero(hit)[0]
            if len(rays):
                out.append(
                    (
                        rays,
                        np.full(len(rays), card),
                        np.full(len(rays), tri),
                        t[rays],
                        u[rays].astype(np.float32).view(np.uint32),
                        v[rays].astype(np.float32).view(np.uint32),
                    )
                )
    cols = [np.concatenate(c) for c in zip(*out)]
    order = np.lexsort((cols[3], cols[0]))  # by ray, then distance
    return [c[order] for c in cols]


def _fields(n, **values):
    base = {
        k: np.zeros(n, dtype=np.int64)
        for k in (
            "source",
            "tri",
            "u",
            "v",
            "dw3",
            "swstoc",
            "level",
            "omm_index",
            "omm_format",
            "omm_word",
            "geom_opaque",
            "ray_flags",
            "instance_flags",
            "internal_flags",
        )
    }
    base.update({k: np.zeros(n, dtype=np.uint64) for k in ("opaque", "transp", "addr")})
    for k, v in values.items():
        base[k] = v
    return base


def _scheme_color(name):
    if name == "none":
        return "grey"
    if name.startswith("STOC"):
        return "tab:blue"
    return "tab:orange" if name.startswith("OMM2") else "tab:green"


def _label_groups(points, near_pct=4.0, near_decades=0.2):
    """Points ``(name, bytes, pct)`` grouped when their labels would overlap on the scatter."""
    groups = []
    for name, x, y in sorted(points, key=lambda p: (p[2], p[1])):
        for group in groups:
            _, gx, gy = group[0]
            if abs(y - gy) < near_pct and abs(np.log10(x / gx)) < near_decades:
                group.append((name, x, y))
                break
        else:
            groups.append([(name, x, y)])
    return groups


def _plots(out_dir, names, results, base_tests, per_variant, memory, textures, what):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    skipped = {k: 100 * (1 - results[k]["tests"] / base_tests) for k in names}
    colors = [_scheme_color(k) for k in names]
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2), gridspec_kw={"width_ratios": (1, 1, 0.8)})
    bars = axes[0].bar(names, [skipped[k] for k in names], color=colors)
    axes[0].bar_label(bars, fmt="%.0f", fontsize=7)
    axes[0].axhline(86, color="red", ls="--", lw=1)
    axes[0].set_ylabel("alpha tests skipped vs no opacity data (%)")
    axes[0].set_title("all cards", fontsize=10)
    axes[0].tick_params(axis="x", rotation=60)
    axes[0].set_ylim(0, 150)  # room for the legend above the bars
    axes[0].legend(
        handles=[
            Patch(color="tab:blue", label="Xe3 STOC leaf bits"),
            Patch(color="tab:green", label="4-state micromap (conservative)"),
            Patch(color="tab:orange", label="2-state micromap (lossy: changes shadow results)"),
            plt.Line2D([], [], color="red", ls="--", label="paper: up to 86 % skipped"),
        ],
        fontsize=7,
        loc="upper left",
    )
    width = 0.8 / len(VARIANTS)
    for vi, kind in enumerate(VARIANTS):
        base_v = max(1, per_variant["none"][vi])
        axes[1].bar(
            np.arange(len(names)) + (vi - 1) * width,
            [100 * (1 - per_variant[k][vi] / base_v) for k in names],
            width,
            label=kind,
        )
    axes[1].set_xticks(np.arange(len(names)))
    axes[1].set_xticklabels(names, rotation=60)
    axes[1].set_ylabel("alpha tests skipped (%)")
    axes[1].set_title("per card type", fontsize=10)
    axes[1].set_ylim(0, 112)
    axes[1].legend(fontsize=8, loc="upper left", ncol=3)
    axes[2].scatter([memory[k] for k in names], [skipped[k] for k in names], c=colors)
    # Labels in a column right of the points, pushed apart vertically and joined to their points
    # by thin lines; coinciding schemes share one label. No two labels can overlap.
    groups = _label_groups([(k, memory[k], skipped[k]) for k in names])
    line = 4.5  # height of one label line, in percent units
    placed, floor = [], -6.0
    for group in groups:
        height = line * len(group)
        centre = max(group[0][2], floor + height / 2)
        placed.append(centre)
        floor = centre + height / 2 + 1
    shift = max(0.0, floor - 1 - 108)  # keep the column inside the axes
    for group, centre in zip(groups, placed):
        _, x, y = group[0]
        axes[2].annotate(
            "\n".join(f"{k} ({bx:g} B)" for k, bx, _ in group),
            (x, y),
            xytext=(1.03, centre - shift),
            textcoords=("axes fraction", "data"),
            fontsize=7,
            va="center",
            annotation_clip=False,
            arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5},
        )
    axes[2].set_xscale("log")
    axes[2].set_xlabel("bytes per triangle (leaf + opacity data, log scale)")
    axes[2].set_ylabel("alpha tests skipped (%)")
    axes[2].set_title("cost in memory", fontsize=10)
    axes[2].set_ylim(-8, 112)
    axes[2].set_xlim(min(memory.values()) / 1.5, max(memory.values()) * 1.5)
    best = max((k for k in names if not k.startswith("OMM2")), key=lambda k: skipped[k])
    leaves = 100 * (1 - per_variant[best][0] / max(1, per_variant["none"][0]))
    fig.suptitle(
        f"Sub-triangle opacity: {best} skips {skipped[best]:.0f}% of the alpha tests "
        f"({leaves:.0f}% on leaf cards; paper: up to 86%), {what}",
        fontsize=11,
    )
    fig.tight_layout()
    plot = out_dir / "stoc_alpha_tests.png"
    fig.savefig(plot, dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 3, figsize=(12, 4.4))
    for ax, kind in zip(axes, VARIANTS):
        ax.imshow(textures[kind].T, origin="lower", cmap="Greens", extent=(0, 1, 0, 1))
        ax.set_title(kind, fontsize=10)
        ax.set_xlabel("texture u")
        ax.set_ylabel("texture v")
    fig.suptitle(
        "Alpha textures of the three card types (dark green = opaque, white = transparent)",
        fontsize=11,
    )
    fig.tight_layout()
    tex_plot = out_dir / "stoc_textures.png"
    fig.savefig(tex_plot, dpi=80)
    plt.close(fig)
    return plot, tex_plot


def _bake(textures, levels, fine_level):
    """``{(variant, triangle, level): states}`` of every card triangle at every level."""
    states = {}
    for vi, kind in enumerate(VARIANTS):
        for tri in range(2):
            for level in sorted(set(levels) | {3, fine_level}):
                states[(vi, tri, level)] = bake_states(textures[kind], CARD_UV[tri], level)
    return states


def _candidates(rng, n_cards, grid, textures, res):
    """The candidate hits of parallel shadow rays through a volume of ``n_cards`` cards, front
    to back per ray, with the alpha test at each hit (nearest texel of the interpolated UV)."""
    variant, verts = _scene(rng, n_cards)
    xs = np.linspace(-3, 13, grid)
    ox, oz = np.meshgrid(xs, xs)
    origins = np.stack([ox.ravel(), np.full(ox.size, 14.0), oz.ravel()], 1).astype(np.float32)
    direction = np.array([0.25, -1.0, 0.15])
    direction /= np.linalg.norm(direction)
    ray, card, tri, t, ub, vb = _intersect(verts, origins, direction)
    n = len(ray)
    var = variant[card]
    u = ub.view(np.float32).astype(np.float64)
    v = vb.view(np.float32).astype(np.float64)
    uv = (
        (1 - u - v)[:, None] * CARD_UV[tri, 0]
        + u[:, None] * CARD_UV[tri, 1]
        + v[:, None] * CARD_UV[tri, 2]
    )
    texel = np.clip(np.floor(uv * res).astype(int), 0, res - 1)
    alpha = np.zeros(n, dtype=bool)
    for vi, kind in enumerate(VARIANTS):
        sel = var == vi
        alpha[sel] = textures[kind][texel[sel, 0], texel[sel, 1]] == 1
    return {"ray": ray, "tri": tri, "ub": ub, "vb": vb, "var": var, "alpha": alpha, "n": n}


class _Tables:
    """Packed micromap words of every (card type, triangle) and the word each candidate reads."""

    def __init__(self, states, hits, fine_level):
        self.n = hits["n"]
        self.hit_key = hits["var"] * 2 + hits["tri"]
        self.packed = {key: pack_states(st, 2) for key, st in states.items()}
        self.packed2 = {
            key: pack_states((st == O_) | (st == UO_), 1)
            for key, st in states.items()
            if key[2] == fine_level
        }

    def word_at(self, table, level, index, bits):
        """The 32-bit word holding state ``index`` of each candidate's triangle at ``level``."""
        words = np.zeros(self.n, dtype=np.int64)
        for (vi, tr, lv), data in table.items():
            sel = self.hit_key == vi * 2 + tr
            if lv == level and sel.any():
                words[sel] = data[(index[sel] * bits) // 32]
        return words


def _scheme_inputs(states, hits, tables, levels, fine_level):
    """``{scheme: fields}``: the golden ``stoc`` block's input for every candidate per scheme."""
    from gpurtl.golden.stoc.classify import Source
    from gpurtl.golden.stoc.index import bary_to_index

    n, tri, var = hits["n"], hits["tri"], hits["var"]
    ub64, vb64 = hits["ub"].astype(np.int64), hits["vb"].astype(np.int64)
    schemes = {}
    # STOC1: DW3 with both triangles' level-1 planes (tri0 opaque 11:8, transp 15:12; tri1
    # opaque 27:24, transp 31:28), IGC QuadLeaf<Xe3>
    dw3_of = {}
    for vi in range(3):
        o0, t0 = _planes(states[(vi, 0, 1)], 1)
        o1, t1 = _planes(states[(vi, 1, 1)], 1)
        dw3_of[vi] = (o0 << 8) | (t0 << 12) | (o1 << 24) | (t1 << 28)
    dw3 = np.array([dw3_of[x] for x in var], dtype=np.int64)
    schemes["STOC1"] = _fields(n, source=np.full(n, Source.STOC1), tri=tri, u=ub64, v=vb64, dw3=dw3)
    op3 = np.zeros(n, dtype=np.uint64)
    tr3 = np.zeros(n, dtype=np.uint64)
    for vi in range(3):
        for tr in range(2):
            o, tp = _planes(states[(vi, tr, 3)], 3)
            sel = (var == vi) & (tri == tr)
            op3[sel], tr3[sel] = np.uint64(o), np.uint64(tp)
    stoc3 = dict(
        source=np.full(n, Source.STOC3),
        tri=tri,
        u=ub64,
        v=vb64,
        opaque=op3,
        transp=tr3,
        level=np.full(n, fine_level),
    )
    schemes["STOC3"] = _fields(n, **stoc3)
    schemes["STOC3+SW6"] = _fields(n, swstoc=np.ones(n, dtype=np.int64), **stoc3)
    for level in levels:
        idx = bary_to_index(ub64, vb64, level)
        schemes[f"OMM {level}"] = _fields(
            n,
            source=np.full(n, Source.OMM),
            u=ub64,
            v=vb64,
            level=np.full(n, level),
            omm_format=np.full(n, 2),
            omm_word=tables.word_at(tables.packed, level, idx, 2),
        )
    idx6 = bary_to_index(ub64, vb64, fine_level)
    schemes[f"OMM2 {fine_level}"] = _fields(
        n,
        source=np.full(n, Source.OMM),
        u=ub64,
        v=vb64,
        level=np.full(n, fine_level),
        omm_format=np.full(n, 1),
        omm_word=tables.word_at(tables.packed2, fine_level, idx6, 1),
    )
    return schemes


def _count(schemes, hits, tables, fine_level):
    """Walk each ray's candidates per scheme, stopping at the first accepted opaque hit: any-hit
    invocations, alpha tests, shadow results and wrong decisions per scheme, alpha tests per card
    type, and the golden model's outputs."""
    from gpurtl.golden.stoc.classify import Action, classify_arrays

    n, ray, var, alpha = hits["n"], hits["ray"], hits["var"], hits["alpha"]
    first = np.r_[True, ray[1:] != ray[:-1]]
    starts = np.nonzero(first)[0]
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    big = np.iinfo(np.int64).max

    def walk(action, needs_test):
        """(any-hit count, alpha-test count, shadowed per ray, alpha tests per candidate) of one
        scheme; ``action`` per candidate (-1 / -2: the any-hit shader ignored / accepted the hit
        from software opacity data), ``needs_test``: candidates whose any-hit reads the texture."""
        accept = (action == -2) | (action == Action.OPAQUE) | ((action == Action.ANYHIT) & alpha)
        stop = np.minimum.reduceat(np.where(accept, rank, big), starts)
        live = rank <= np.repeat(stop, np.diff(np.r_[starts, n]))
        anyhit = live & ((action == Action.ANYHIT) | (action < 0))
        tests = live & (action == Action.ANYHIT) & needs_test
        return int(anyhit.sum()), int(tests.sum()), stop < big, tests

    base_action = np.full(n, Action.ANYHIT)
    base_hits, base_tests, base_shadow, base_t = walk(base_action, np.ones(n, bool))
    results = {"none": dict(anyhit=base_hits, tests=base_tests, shadow_diff=0, wrong=0)}
    per_variant = {"none": [int(base_t[var == vi].sum()) for vi in range(3)]}
    golden_out = {}
    for name, f in schemes.items():
        out = classify_arrays(f)
        golden_out[name] = out
        action = out["action"]
        needs_test = np.ones(n, dtype=bool)
        if name == "STOC3+SW6":
            # the any-hit shader's software STOC: read the level-6 state at fetch_addr
            fine = out["fine_index"]
            word = tables.word_at(tables.packed, fine_level, fine, 2)
            fine_state = (word >> ((fine * 2) % 32)) & 3
            sw = out["sw_fallback"] == 1
            needs_test = ~sw | (fine_state >= UT_)
            # resolved by software: transparent -> ignore, opaque -> accept
            action = action.copy()
            action[sw & (fine_state == T_)] = -1  # any-hit ran, ignored the hit
            action[sw & (fine_state == O_)] = -2  # any-hit ran, accepted the hit
        hits_, tests, shadow, t_mask = walk(action, needs_test)
        wrong = int(
            ((action == Action.OPAQUE) & ~alpha).sum() + ((action == Action.IGNORE) & alpha).sum()
        )
        results[name] = dict(
            anyhit=hits_, tests=tests, shadow_diff=int((shadow != base_shadow).sum()), wrong=wrong
        )
        per_variant[name] = [int(t_mask[var == vi].sum()) for vi in range(3)]
    return results, per_variant, golden_out, len(starts)


def _memory(levels, fine_level):
    """Bytes per triangle of every scheme: leaf plus opacity data."""
    leaf = 32.0  # 64-byte quad leaf / 2 triangles (IGC QuadLeaf)
    memory = {
        "none": leaf,
        "STOC1": leaf,
        "STOC3": 2 * leaf,
        "STOC3+SW6": 2 * leaf + 2 * 4**fine_level / 8,
    }
    for level in levels:  # data + VkMicromapTriangleKHR (8 B) + u32 index
        memory[f"OMM {level}"] = leaf + max(1, 2 * 4**level // 8) + 8 + 4
    memory[f"OMM2 {fine_level}"] = leaf + 4**fine_level // 8 + 8 + 4
    return memory


def _rtl_replay(rng, schemes, golden_out, n, sample_per, fine_level):
    """A sample of the lookups of several schemes through the ``stoc`` RTL (Amaranth simulator),
    compared with the golden model's outputs."""
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.core import registry

    block = registry.get("stoc")
    params = block.resolve()
    inputs, expected = [], []
    pick = rng.choice(n, min(n, sample_per), replace=False)
    for name in ("STOC1", "STOC3", "STOC3+SW6", "OMM 1", "OMM 3", "OMM 6", f"OMM2 {fine_level}"):
        f, out = schemes[name], golden_out[name]
        for k in pick:
            inputs.append({key: int(val[k]) for key, val in f.items()})
            expected.append({key: int(val[k]) for key, val in out.items()})
    return BACKENDS["pysim"].run(block, params, inputs, expected=expected)


def measure(*, quick=False, progress=None, **params):
    """Bake, intersect, classify every candidate under every scheme, replay a sample on the RTL
    (``quick``: 120 cards, 40 x 40 rays, 128 x 128 textures)."""
    check_params(NAME, params)
    started = time.monotonic()
    res = 128 if quick else 256
    n_cards = 120 if quick else 800
    grid = 40 if quick else 160
    levels = list(range(1, 7))
    fine_level = 6
    rng = np.random.default_rng(2020)
    steps = len(VARIANTS) + 3
    done = 0

    def step(what):
        nonlocal done
        done += 1
        if progress:
            progress(done, steps, what)

    textures = {kind: make_texture(kind, res) for kind in VARIANTS}
    states = _bake(textures, levels, fine_level)
    for kind in VARIANTS:
        step(f"baked {kind}")
    hits = _candidates(rng, n_cards, grid, textures, res)
    step(f"{hits['n']} candidate hits")
    tables = _Tables(states, hits, fine_level)
    schemes = _scheme_inputs(states, hits, tables, levels, fine_level)
    results, per_variant, golden_out, rays = _count(schemes, hits, tables, fine_level)
    step("classified")
    replay = _rtl_replay(rng, schemes, golden_out, hits["n"], 8 if quick else 40, fine_level)
    step("RTL replay")
    return {
        "texture_res": res,
        "cards": n_cards,
        "grid": grid,
        "fine_level": fine_level,
        "candidates": hits["n"],
        "shadow_rays": rays,
        "results": results,
        "per_variant": per_variant,
        "memory": _memory(levels, fine_level),
        "rtl": {"passed": replay.passed, "failed": replay.failed, "line": replay.line()},
        "seconds": time.monotonic() - started,
    }


def report(data, out_dir):
    """``stoc_counts.csv``, two plots and ``summary.md``."""
    results, per_variant, memory = data["results"], data["per_variant"], data["memory"]
    fine_level, n_cards = data["fine_level"], data["cards"]
    base_hits, base_tests = results["none"]["anyhit"], results["none"]["tests"]
    names = list(results)
    rows_csv = []
    for name in names:
        r = results[name]
        rows_csv.append(
            {
                "scheme": name,
                "anyhit": r["anyhit"],
                "alpha_tests": r["tests"],
                "alpha_tests_skipped_pct": round(100 * (1 - r["tests"] / base_tests), 2),
                "anyhit_skipped_pct": round(100 * (1 - r["anyhit"] / base_hits), 2),
                "shadow_rays_changed": r["shadow_diff"],
                "wrong_decisions": r["wrong"],
                "bytes_per_triangle": memory[name],
                **{f"alpha_tests_{VARIANTS[vi]}": per_variant[name][vi] for vi in range(3)},
            }
        )
    csv_path = write_csv(out_dir / "stoc_counts.csv", rows_csv)
    textures = {kind: make_texture(kind, data["texture_res"]) for kind in VARIANTS}
    plot, tex_plot = _plots(
        out_dir,
        names,
        results,
        base_tests,
        per_variant,
        memory,
        textures,
        f"{data['candidates']} candidate hits, {data['shadow_rays']} shadow rays, {n_cards} cards",
    )
    rows = [
        (
            "candidate hits / shadow rays with a hit",
            f"{data['candidates']} / {data['shadow_rays']}",
        ),
        ("any-hit invocations = alpha tests without opacity data", str(base_tests)),
    ]
    for name in names[1:]:
        r = results[name]
        rows.append(
            (
                f"{name}: any-hit / alpha tests (skipped vs none), B/tri",
                f"{r['anyhit']} / {r['tests']} ({100 * (1 - r['tests'] / base_tests):.1f}%"
                f" skipped), {memory[name]:g} B",
            )
        )
    conservative = [k for k in names[1:] if not k.startswith("OMM2")]
    rows.append(
        (
            "shadow results changed / candidates decided against the alpha test "
            "(conservative schemes)",
            f"{sum(results[k]['shadow_diff'] for k in conservative)} / "
            f"{sum(results[k]['wrong'] for k in conservative)}",
        )
    )
    lossy = results[f"OMM2 {fine_level}"]
    rows.append(
        (
            f"OMM2 {fine_level}: candidates decided against the alpha test / shadow rays changed",
            f"{lossy['wrong']} / {lossy['shadow_diff']}",
        )
    )
    rows.append(("RTL `stoc` replay (pysim) vs golden", data["rtl"]["line"]))
    rows.append(("paper (Gruen et al. HPG 2020)", "up to 86% of transparency tests skipped"))
    rows.append(("run time (s)", f"{data['seconds']:.1f}"))

    def skipped(kind, vi):
        return lambda row: 1 - row[f"alpha_tests_{kind}"] / max(1, per_variant["none"][vi])

    columns = [
        Column("scheme"),
        Column("anyhit", "any-hit"),
        Column("alpha_tests", "alpha tests"),
        Column("skipped", get=lambda row: f"{row['alpha_tests_skipped_pct']}%"),
        *(
            Column(kind, f"skipped ({kind})", "%", 1, get=skipped(kind, vi))
            for vi, kind in enumerate(VARIANTS)
        ),
        Column("shadow_rays_changed", "shadow changed"),
        Column("wrong_decisions", "wrong"),
        Column("bytes_per_triangle", "B/tri", get=lambda row: f"{row['bytes_per_triangle']:g}"),
    ]
    res, grid = data["texture_res"], data["grid"]
    summary = document(
        out_dir / "summary.md",
        "STOC / opacity micromap experiment",
        f"{n_cards} leaf cards ({', '.join(VARIANTS)}), alpha textures {res}x{res}, "
        f"{grid * grid} parallel shadow rays (accept first opaque hit).",
        markdown(rows_csv, columns),
        metrics(rows),
    )
    return {
        "title": "Sub-triangle opacity culling: alpha tests skipped and memory",
        "rows": rows,
        "files": [csv_path, str(plot), str(tex_plot), summary],
    }
