"""The RT IP 3.1 (RDNA 4) OBB rotation tables: 104 matrices in a two-level lookup table.

From AMD GPUOpen gpurt ``src/shadersClean/common/ObbCommon.hlsli`` (``ObbStage1Lut``,
``ObbStage2Lut``); the ray transform that uses them is gpurt
``src/shadersClean/common/Common.hlsl`` ``OBBTransform``.

* A type-5 box node names a rotation by its 7-bit ``obbMatrixIndex`` (DW7 bits [6:0]); 0..103 pick
  one of 104 matrices, ``0x7F`` means "no rotation" (:data:`NO_ROTATION`).
* Stage 1: 104 entries of 54 bits = nine 6-bit element codes; element (r, c) sits at bits
  ``[18r+6c+5 : 18r+6c]``. Code bit 5 is the sign, bits 4:0 index stage 2.
* Stage 2: 32 FP32 magnitudes (26 used, entries 26..31 are 0). The element's bit pattern is
  ``STAGE2[code & 0x1F] | (code >> 5) << 31``.

Matrix rows map a world vector into the box frame (``v_local = M v``). Shared by the RTL
(:mod:`gpurtl.hdl.ray_accel.obb_transform` holds the same two tables as ROMs) and the golden model
(:mod:`gpurtl.golden.ray_accel.scalar.obb`).
"""

import operator

__all__ = [
    "STAGE2",
    "STAGE1",
    "OBB_COUNT",
    "NO_ROTATION",
    "IDENTITY_BITS",
    "stage1_codes",
    "element_bits",
    "obb_matrix_bits",
]

#: Number of rotation matrices; a 7-bit index 0..103 picks one.
OBB_COUNT = 104
#: The ``obbMatrixIndex`` meaning "no rotation" (gpurt ``INVALID_OBB``).
NO_ROTATION = 0x7F
_ONE = 0x3F800000

#: Stage 2 (gpurt ``ObbStage2Lut``): FP32 bit patterns of the magnitudes; entries 26..31 are unused.
STAGE2 = (
    0x00000000,
    0x3D1BE50C,
    0x3E15F61A,
    0x3E484336,
    0x3E79DF93,
    0x3E7C3A3A,
    0x3E8A8BD4,
    0x3E9E0875,
    0x3E9F0938,
    0x3EA7BF1B,
    0x3EAAAAAB,
    0x3EC3EF15,
    0x3F000000,
    0x3F01814F,
    0x3F16A507,
    0x3F273D75,
    0x3F30FBC5,
    0x3F3504F3,
    0x3F3D3A87,
    0x3F4E034D,
    0x3F5A827A,
    0x3F692290,
    0x3F6C835E,
    0x3F73023F,
    0x3F7641AF,
    0x3F800000,
    0,
    0,
    0,
    0,
    0,
    0,
)

#: Stage 1 (gpurt ``ObbStage1Lut``): 104 entries of nine 6-bit element codes (54 bits).
STAGE1 = (
    0x162C0AD6000019,
    0x16AC02D6000019,
    0x11440C51000019,
    0x11C40451000019,
    0x0B580D8B000019,
    0x0BD8058B000019,
    0x00640E40000019,
    0x00E40640000019,
    0x1602B01900B016,
    0x1600B01902B016,
    0x11031019011011,
    0x11011019031011,
    0x0B03601901600B,
    0x0B01601903600B,
    0x00039019019000,
    0x00019019039000,
    0x190000162C0AD6,
    0x19000016AC02D6,
    0x19000011440C51,
    0x19000011C40451,
    0x1900000B580D8B,
    0x1900000BD8058B,
    0x19000000640E40,
    0x19000000E40640,
    0x18066058186996,
    0x180460589A6196,
    0x140AC09430CB11,
    0x1408C094B2C311,
    0x101EF1D03CFBCB,
    0x101CF1D0BEF3CB,
    0x0C33130C451C40,
    0x0C31130CC71440,
    0x188468581A6996,
    0x18866858986196,
    0x1488C89432CB11,
    0x148AC894B0C311,
    0x109CF9D03EFBCB,
    0x109EF9D0BCF3CB,
    0x0CB11B0C471C40,
    0x0CB31B0CC51440,
    0x18181996181998,
    0x18981196981198,
    0x14302B11302B14,
    0x14B02311B02314,
    0x103C7BCB3C7BD0,
    0x10BC73CBBC73D0,
    0x0C44CC4044CC4C,
    0x0CC4C440C4C44C,
    0x181A19969A1198,
    0x189A11961A1998,
    0x14322B11B22314,
    0x14B22311322B14,
    0x103E7BCBBE73D0,
    0x10BE73CB3E7BD0,
    0x0C46CC40C6C44C,
    0x0CC6C44046CC4C,
    0x161A6998046058,
    0x16986198066058,
    0x1132CB1408C094,
    0x11B0C3140AC094,
    0x0B3EFBD01CF1D0,
    0x0BBCF3D01EF1D0,
    0x00471C4C31130C,
    0x00C5144C33130C,
    0x169A6198846858,
    0x16186998866858,
    0x11B2C31488C894,
    0x1130CB148AC894,
    0x0BBEF3D09CF9D0,
    0x0B3CFBD09EF9D0,
    0x00C7144CB11B0C,
    0x00451C4CB31B0C,
    0x171638D71458D7,
    0x178C51578E3157,
    0x13368A1334DA13,
    0x13A0D353A28353,
    0x0E4A9A4E492A4E,
    0x0EA5248EA6948E,
    0x0A56490A55590A,
    0x0A91554A92454A,
    0x178E51570C3957,
    0x171438D79650D7,
    0x13A2D353208B53,
    0x13348A13B6D213,
    0x0EA7248E249C8E,
    0x0E489A4ECB224E,
    0x0A93554A104D4A,
    0x0A54490AD7510A,
    0x170C59570E3957,
    0x179630D79450D7,
    0x1320DB53228B53,
    0x13B68213B4D213,
    0x0E252C8E269C8E,
    0x0ECA924EC9224E,
    0x0A115D4A124D4A,
    0x0AD6410AD5510A,
    0x179430D71658D7,
    0x170E59578C3157,
    0x13B4821336DA13,
    0x1322DB53A08353,
    0x0EC8924E4B2A4E,
    0x0E272C8EA4948E,
    0x0AD4410A57590A,
    0x0A135D4A90454A,
)
assert len(STAGE1) == OBB_COUNT and len(STAGE2) == 32

#: The identity matrix as FP32 bit patterns (what :data:`NO_ROTATION` stands for).
IDENTITY_BITS = ((_ONE, 0, 0), (0, _ONE, 0), (0, 0, _ONE))


def _check_index(index):
    try:
        value = operator.index(index)
    except TypeError:
        value = None
    if value is None or isinstance(index, bool) or not 0 <= value < OBB_COUNT:
        raise ValueError(
            f"`index` must be an OBB matrix index from 0 to {OBB_COUNT - 1}, not {index!r}"
        )
    return value


def stage1_codes(index):
    """The nine 6-bit element codes of matrix ``index`` as a 3x3 tuple (row-major)."""
    entry = STAGE1[_check_index(index)]
    return tuple(tuple((entry >> (18 * r + 6 * c)) & 0x3F for c in range(3)) for r in range(3))


def element_bits(code):
    """FP32 bit pattern of one 6-bit element code (sign bit 5, stage-2 index bits 4:0)."""
    if not 0 <= code < 64:
        raise ValueError(f"`code` must be a 6-bit value, not {code!r}")
    return STAGE2[code & 0x1F] | ((code >> 5) << 31)


def obb_matrix_bits(index):
    """3x3 FP32 bit patterns (rows, ``v_local = M v``) of ``index``; 0x7F gives the identity."""
    if index == NO_ROTATION:
        return IDENTITY_BITS
    return tuple(tuple(element_bits(code) for code in row) for row in stage1_codes(index))
