"""SDP X-operand plumbing RTL: the BRDMA/NRDMA operand unpacker hdl.sdp.brdma.OperandUnpack
(every DATA_USE / DATA_SIZE / DATA_MODE), against plain-Python formulas, with random stalls."""
import random

import pytest

from hdl.sdp.brdma import OperandUnpack
from streams import simulate_streams as _sim, stream_get, stream_put


def _s(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def unpack_ref(group_bytes, use, two_byte, lanes):
    """(alu, mul) per lane from the bytes of one element group (format.rst Bias / Batch
    Normalization data format: ALU component first, little endian, sign-extended)."""
    out = []
    for e in range(lanes):
        if use == 2 and two_byte:
            b = group_bytes[4 * e:4 * e + 4]
            out.append((_s(b[0] | b[1] << 8, 16), _s(b[2] | b[3] << 8, 16)))
        elif use == 2:
            out.append((_s(group_bytes[2 * e], 8), _s(group_bytes[2 * e + 1], 8)))
        elif two_byte:
            v = _s(group_bytes[2 * e] | group_bytes[2 * e + 1] << 8, 16)
            out.append((v, v))
        else:
            v = _s(group_bytes[e], 8)
            out.append((v, v))
    return out


@pytest.mark.parametrize("use", [0, 1, 2])
@pytest.mark.parametrize("two_byte", [0, 1])
@pytest.mark.parametrize("per_element,repeat", [(1, 1), (0, 3)])
def test_operand_unpack(use, two_byte, per_element, repeat):
    lanes = 8
    rng = random.Random(use * 4 + two_byte * 2 + per_element)
    dut = OperandUnpack(lanes, lanes)
    k = (2 if use == 2 else 1) * (2 if two_byte else 1)
    n_groups = 9
    stream_bytes = [rng.randrange(256) for _ in range(n_groups * k * lanes)]
    atoms = [int.from_bytes(bytes(stream_bytes[a * lanes:(a + 1) * lanes]), "little")
             for a in range(n_groups * k)]
    got = []

    async def prod(ctx):
        ctx.set(dut.fmt.use, use)
        ctx.set(dut.fmt.two_byte, two_byte)
        ctx.set(dut.fmt.per_element, per_element)
        ctx.set(dut.repeat, repeat)
        await stream_put(ctx, dut.i, atoms, rng=rng, p_stall=0.3)

    async def cons(ctx):
        got.extend(await stream_get(ctx, dut.o, n_groups * repeat, rng=rng, p_stall=0.3))

    _sim(dut, [prod], [cons], [("i", dut.i), ("o", dut.o)])
    gb = k * lanes
    want = [unpack_ref(stream_bytes[g * gb:(g + 1) * gb], use, two_byte, lanes)
            for g in range(n_groups) for _ in range(repeat)]
    assert [[(int(x.alu), int(x.mul)) for x in g] for g in got] == want
