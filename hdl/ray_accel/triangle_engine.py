"""Watertight ray/triangle engine: per-ray setup and two triangle tests per cycle (RTL).

Bit-exact with :func:`gpurtl.golden.ray_accel.scalar.triangle.ray_setup` and
:func:`gpurtl.golden.ray_accel.scalar.triangle.intersect`, whose doc string defines the algorithm (Woop,
Benthin and Wald 2013, in FP32, with this project's tie rule) and the exact operation order. **The
hardware's own triangle algorithm is not public**; this is the project's documented choice. All
FP32 arithmetic runs on the pipelined cores of :mod:`gpurtl.hdl.fp32` (``FPAddCore``,
``FPMulCore``, ``FPFMACore``, ``FPDivCore``); only sign/magnitude tests against 0 and +inf and the
axis selection are plain logic here.

Both components are clock-enable datapath cores (no valid/ready): ``en`` advances every register,
``latency`` (property) is the number of register stages from input to output, II = 1.

``RaySetupCore``
    ``i``: :data:`SETUP_IN_LAYOUT` (``dir[3]``) -> ``o``: :data:`SETUP_LAYOUT` (``kx``, ``ky``,
    ``kz`` axis numbers 0..2, ``sx``, ``sy``, ``sz`` FP32). Three dividers in parallel;
    ``latency`` = the divider latency.
``TriangleEngine``
    ``i``: :data:`ENGINE_IN_LAYOUT` (``origin[3]``, ``setup`` (:data:`SETUP_LAYOUT`), ``tri[2]``
    of ``v[3][3]``) -> ``o``: :data:`ENGINE_OUT_LAYOUT` (``lane[2]`` of ``hit``, ``t``, ``i``,
    ``j``, ``backface``, and for the legacy 4-dword results the undivided ``t_num`` (= T),
    ``t_den`` (= det) and edge functions ``u``, ``v``, ``w``). Two independent triangle lanes
    sharing the ray setup. Per lane: 14 adders, 10 multipliers, 8 FMAs, 3 dividers.

The FP32 core depths are constructor parameters (``stages``; ``None`` = the core's default); the
scheduler in this module (:class:`Sched`) inserts the delay registers that line operands up, so
``latency`` follows from them: setup = ``div``; engine = :func:`engine_latency` =
``max(a+f+m+a + 2a, max(a+f+m+a, a+m) + m + 2f) + div`` (``a``, ``m``, ``f`` = add, mul, FMA
latencies: subtract origin, shear FMA, edge products, edge differences, then ``det`` sums / ``T``
chain, then the divisions).
"""

from amaranth.hdl import Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, wiring

from gpurtl.facts.fp32 import ONE, POS_INF, SIGN_BIT, Float32

from ..fp32 import FPAddCore, FPDivCore, FPFMACore, FPMulCore
from ..pipe import EnableCoreSignature, reg

__all__ = [
    "SETUP_IN_LAYOUT",
    "SETUP_LAYOUT",
    "ENGINE_IN_LAYOUT",
    "LANE_LAYOUT",
    "ENGINE_OUT_LAYOUT",
    "RaySetupCore",
    "TriangleEngine",
    "engine_latency",
    "Sched",
    "Timed",
    "FP_UNITS",
]


VEC3 = data.ArrayLayout(Float32, 3)
SETUP_IN_LAYOUT = data.StructLayout({"dir": VEC3})
SETUP_LAYOUT = data.StructLayout(
    {
        "kx": unsigned(2),
        "ky": unsigned(2),
        "kz": unsigned(2),
        "sx": Float32,
        "sy": Float32,
        "sz": Float32,
    }
)
ENGINE_IN_LAYOUT = data.StructLayout(
    {
        "origin": VEC3,
        "setup": SETUP_LAYOUT,
        "tri": data.ArrayLayout(data.ArrayLayout(VEC3, 3), 2),
    }
)
LANE_LAYOUT = data.StructLayout(
    {
        "hit": unsigned(1),
        "t": Float32,
        "i": Float32,
        "j": Float32,
        "backface": unsigned(1),
        "t_num": Float32,
        "t_den": Float32,
        "u": Float32,
        "v": Float32,
        "w": Float32,
    }
)
ENGINE_OUT_LAYOUT = data.StructLayout({"lane": data.ArrayLayout(LANE_LAYOUT, 2)})

FP_UNITS = {"add": FPAddCore, "mul": FPMulCore, "fma": FPFMACore, "div": FPDivCore}


def check_stages(stages):
    """Validated ``{"add": n|None, "mul": ..., "fma": ..., "div": ...}``."""
    stages = dict(stages or {})
    for key, value in stages.items():
        if key not in FP_UNITS:
            raise ValueError(f"`stages` keys must be among {sorted(FP_UNITS)}, not {key!r}")
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise TypeError(
                f"`stages[{key!r}]` must be a non-negative integer or None, not {value!r}"
            )
    return {key: stages.get(key) for key in FP_UNITS}


def unit_latency(kind, stages):
    """Latency of one FP32 core of ``kind`` with ``stages[kind]`` registers (``None``: default).

    The contract fixes ``latency == stages``; the default depth is the core's ``DEFAULT_STAGES``.
    """
    cls = FP_UNITS[kind]
    n = stages[kind]
    return n if n is not None else cls.DEFAULT_STAGES


def engine_latency(stages=None):
    """:attr:`TriangleEngine.latency` for FP32 core depths ``stages`` (without building it)."""
    st = check_stages(stages)
    a, mu, f, dv = (unit_latency(k, st) for k in ("add", "mul", "fma", "div"))
    shear = a + f  # P - O, then the shear FMA (z: P - O then mul)
    edges = shear + mu + a  # products, differences
    det = edges + 2 * a  # (U + V) + W
    tnum = max(edges, a + mu) + mu + 2 * f  # U * Az, then two FMAs
    return max(det, tnum) + dv


class Timed:
    """A value and the register stage (time) at which it is valid."""

    def __init__(self, value, time):
        self.value, self.time = value, time
        self.chain = [value]


class Sched:
    """Builds a datapath of FP cores with automatic delay-register alignment.

    Every register (delay lines here, pipeline registers inside the cores) advances with ``en``.
    """

    def __init__(self, m, en, prefix, stages):
        self.m, self.en, self.prefix, self.stages = m, en, prefix, stages
        self._n = 0

    def _name(self, what):
        self._n += 1
        return f"{self.prefix}_{what}{self._n}"

    def at(self, tv, time):
        """The value of ``tv`` delayed to ``time`` (shared delay chain per value)."""
        if not isinstance(tv, Timed):
            return tv
        if time < tv.time:
            raise ValueError("cannot move a value back in time")
        while len(tv.chain) <= time - tv.time:
            prev = tv.chain[-1]
            tv.chain.append(reg(self.m, self.en, prev, self._name("d"), shape=len(prev)))
        return tv.chain[time - tv.time]

    def align(self, *tvs):
        time = max([tv.time for tv in tvs if isinstance(tv, Timed)], default=0)
        return time, [self.at(tv, time) for tv in tvs]

    def comb(self, fn, *tvs, width=32, name="c"):
        time, values = self.align(*tvs)
        sig = Signal(width, name=self._name(name))
        self.m.d.comb += sig.eq(fn(*values))
        return Timed(sig, time)

    def core(self, kind, name, **ports):
        cls = FP_UNITS[kind]
        n = self.stages[kind]
        unit = cls(stages=n) if n is not None else cls()
        self.m.submodules[self._name(name)] = unit
        time, values = self.align(*ports.values())
        self.m.d.comb += unit.en.eq(self.en)
        for port, value in zip(ports, values):
            self.m.d.comb += getattr(unit, port).eq(value)
        return Timed(unit.z, time + unit.latency)

    def add(self, a, b):
        return self.core("add", "add", a=a, b=b, sub=Const(0, 1))

    def sub(self, a, b):
        return self.core("add", "sub", a=a, b=b, sub=Const(1, 1))

    def mul(self, a, b):
        return self.core("mul", "mul", a=a, b=b)

    def fma(self, a, b, c):
        return self.core("fma", "fma", a=a, b=b, c=c)

    def div(self, a, b):
        return self.core("div", "div", a=a, b=b)


def is_nan(x):
    return Float32(x).is_nan()


def lt_zero(x):
    """IEEE ``x < 0``."""
    f = Float32(x)
    return f.sign & ~f.is_zero() & ~f.is_nan()


def gt_zero(x):
    """IEEE ``x > 0``."""
    f = Float32(x)
    return ~f.sign & ~f.is_zero() & ~f.is_nan()


class RaySetupCore(wiring.Component):
    """Per-ray constants of the watertight test (see the module doc string)."""

    def __init__(self, *, stages=None):
        self._stages = check_stages(stages)
        super().__init__(EnableCoreSignature(SETUP_IN_LAYOUT, SETUP_LAYOUT))

    @property
    def latency(self):
        return unit_latency("div", self._stages)

    def elaborate(self, platform):
        m = Module()
        s = Sched(m, self.en, "setup", self._stages)
        d = [Value.cast(self.i.dir[k]) for k in range(3)]
        mag = [Float32(v).magnitude() for v in d]
        kz = Signal(2, name="setup_kz")
        m.d.comb += kz.eq(
            Mux((mag[0] >= mag[1]) & (mag[0] >= mag[2]), 0, Mux(mag[1] >= mag[2], 1, 2))
        )
        dz = Signal(32, name="setup_dz")
        m.d.comb += dz.eq(Mux(kz == 0, d[0], Mux(kz == 1, d[1], d[2])))
        swap = lt_zero(dz)
        kx0 = Mux(kz == 2, 0, kz + 1)[:2]
        ky0 = Mux(kx0 == 2, 0, kx0 + 1)[:2]
        kx, ky = Signal(2, name="setup_kx"), Signal(2, name="setup_ky")
        m.d.comb += [kx.eq(Mux(swap, ky0, kx0)), ky.eq(Mux(swap, kx0, ky0))]

        def pick(k):
            return Mux(k == 0, d[0], Mux(k == 1, d[1], d[2]))

        dx, dy = Signal(32, name="setup_dx"), Signal(32, name="setup_dy")
        m.d.comb += [dx.eq(pick(kx)), dy.eq(pick(ky))]
        tdz = Timed(dz, 0)
        sx = s.div(Timed(dx, 0), tdz)
        sy = s.div(Timed(dy, 0), tdz)
        sz = s.div(Const(ONE, 32), tdz)
        lat = self.latency
        m.d.comb += [
            self.o.kx.eq(s.at(Timed(kx, 0), lat)),
            self.o.ky.eq(s.at(Timed(ky, 0), lat)),
            self.o.kz.eq(s.at(Timed(kz, 0), lat)),
            self.o.sx.eq(s.at(sx, lat)),
            self.o.sy.eq(s.at(sy, lat)),
            self.o.sz.eq(s.at(sz, lat)),
        ]
        return m


class TriangleEngine(wiring.Component):
    """Two watertight triangle tests per cycle (see the module doc string).

    Parameters
    ----------
    stages : dict, optional
        Register stages of the FP32 cores: ``{"add": n, "mul": n, "fma": n, "div": n}``; a
        missing key or ``None`` uses the core's default.
    raw_outputs : bool
        Drive the undivided ``t_num``/``t_den`` and the edge functions ``u``/``v``/``w`` (needed by
        the legacy 4-dword results; their delay registers are saved when False).

    Attributes
    ----------
    en : In(1)
    i : In(ENGINE_IN_LAYOUT)
    o : Out(ENGINE_OUT_LAYOUT)
        ``latency`` enabled cycles after ``i``.
    """

    def __init__(self, *, stages=None, raw_outputs=True):
        self._stages = check_stages(stages)
        if not isinstance(raw_outputs, bool):
            raise TypeError(f"`raw_outputs` must be a boolean, not {raw_outputs!r}")
        self._raw = raw_outputs
        super().__init__(EnableCoreSignature(ENGINE_IN_LAYOUT, ENGINE_OUT_LAYOUT))

    @property
    def raw_outputs(self):
        """Whether ``t_num``, ``t_den``, ``u``, ``v``, ``w`` are driven (else they read 0)."""
        return self._raw

    @property
    def stages(self):
        return dict(self._stages)

    @property
    def latency(self):
        return engine_latency(self._stages)

    def elaborate(self, platform):
        m = Module()
        lat = self.latency
        setup = self.i.setup
        for lane in range(2):
            s = Sched(m, self.en, f"l{lane}", self._stages)
            kx, ky, kz = (Timed(Value.cast(setup[k]), 0) for k in ("kx", "ky", "kz"))
            sz = Timed(Value.cast(setup.sz), 0)
            nsx = Timed(Value.cast(setup.sx) ^ SIGN_BIT, 0)
            nsy = Timed(Value.cast(setup.sy) ^ SIGN_BIT, 0)
            origin = [Timed(Value.cast(self.i.origin[c]), 0) for c in range(3)]
            pts = []
            for n in range(3):
                rel = [
                    s.sub(Timed(Value.cast(self.i.tri[lane][n][c]), 0), origin[c]) for c in range(3)
                ]

                def perm(k, rel=rel):
                    return s.comb(
                        lambda k, r0, r1, r2: Mux(k == 0, r0, Mux(k == 1, r1, r2)),
                        k,
                        *rel,
                        name="perm",
                    )

                rx, ry, rz = perm(kx), perm(ky), perm(kz)
                px = s.fma(nsx, rz, rx)
                py = s.fma(nsy, rz, ry)
                pz = s.mul(sz, rz)
                pts.append((px, py, pz))
            (ax, ay, az), (bx, by, bz), (cx, cy, cz) = pts
            u = s.sub(s.mul(cx, by), s.mul(cy, bx))
            v = s.sub(s.mul(ax, cy), s.mul(ay, cx))
            w = s.sub(s.mul(bx, ay), s.mul(by, ax))
            inside = s.comb(
                lambda u, v, w: (
                    ~(
                        (lt_zero(u) | lt_zero(v) | lt_zero(w))
                        & (gt_zero(u) | gt_zero(v) | gt_zero(w))
                    )
                ),
                u,
                v,
                w,
                width=1,
                name="inside",
            )
            det = s.add(s.add(u, v), w)
            tnum = s.fma(w, cz, s.fma(v, bz, s.mul(u, az)))
            t = s.div(tnum, det)
            i = s.div(v, det)
            j = s.div(w, det)
            hit = s.comb(
                lambda inside, det, t: (
                    inside
                    & ~is_nan(det)
                    & ~Float32(det).is_zero()
                    & ~is_nan(t)
                    & (~Float32(t).sign | Float32(t).is_zero())
                    & (t != POS_INF)
                ),
                inside,
                det,
                t,
                width=1,
                name="hit",
            )
            back = s.comb(lambda det: Float32(det).sign, det, width=1, name="back")
            assert max(hit.time, t.time, i.time, j.time) == lat, "latency formula out of date"
            out = self.o.lane[lane]
            m.d.comb += [
                out.hit.eq(s.at(hit, lat)),
                out.t.eq(s.at(t, lat)),
                out.i.eq(s.at(i, lat)),
                out.j.eq(s.at(j, lat)),
                out.backface.eq(s.at(back, lat)),
            ]
            if self._raw:
                m.d.comb += [
                    out.t_num.eq(s.at(tnum, lat)),
                    out.t_den.eq(s.at(det, lat)),
                    out.u.eq(s.at(u, lat)),
                    out.v.eq(s.at(v, lat)),
                    out.w.eq(s.at(w, lat)),
                ]
        return m
