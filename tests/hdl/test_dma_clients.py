# amaranth: UnusedElaboratable=no
# (test_params_from_config constructs DMAs only to check their parameters.)
"""hdl.dma.clients: the MCIF client table (unique names, every index a client port of MCIF for
every configuration preset, lookups by name, unknown names rejected) and the DMA parameters
derived from a configuration, which elaborate a ReadDma/WriteDma for every preset and max burst."""
import pytest

from hdl.config import PRESETS, get_config
from hdl.dma import (READ_CLIENTS, WRITE_CLIENTS, ReadDma, WriteDma, dma_params, read_client,
                     read_dma_params, write_client, write_dma_params)

CONFIGS = [get_config(f"{name}+primary_memif_max_burst={burst}")
           for name in PRESETS for burst in (1, 4)]


def test_names_unique():
    assert len(set(READ_CLIENTS)) == len(READ_CLIENTS) > 0
    assert len(set(WRITE_CLIENTS)) == len(WRITE_CLIENTS) > 0


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_indices_fit_mcif(cfg):
    assert len(READ_CLIENTS) <= cfg.num_dma_read_clients
    assert len(WRITE_CLIENTS) <= cfg.num_dma_write_clients
    assert [read_client(n) for n in READ_CLIENTS] == list(range(len(READ_CLIENTS)))
    assert [write_client(n) for n in WRITE_CLIENTS] == list(range(len(WRITE_CLIENTS)))
    assert read_client("sdp_mrdma") < cfg.num_dma_read_clients
    assert write_client("sdp_wdma") < cfg.num_dma_write_clients


@pytest.mark.parametrize("lookup,name", [(read_client, "sdp_wdma"), (read_client, "no_such"),
                                         (write_client, "sdp_mrdma"), (write_client, "")])
def test_unknown_name_raises(lookup, name):
    with pytest.raises(ValueError):
        lookup(name)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_params_from_config(cfg):
    p = dma_params(cfg)
    assert p == dict(addr_width=cfg.mem_address_width, atom_bytes=cfg.atom_bytes,
                     atom_elems=cfg.memory_atomic, beat_bytes=cfg.primary_memif_width // 8,
                     max_burst=cfg.primary_memif_max_burst)
    assert p["atom_bytes"] == cfg.memory_atomic * cfg.bpe // 8
    rp, wp = read_dma_params(cfg), write_dma_params(cfg)
    # read: the latency FIFO covers the memory latency with a margin, a power of two
    assert rp.pop("depth") == max(64, 1 << (cfg.primary_memif_latency + 16 - 1).bit_length())
    # write: four bursts
    assert wp.pop("depth") == max(8, 4 * cfg.primary_memif_max_burst)   # test_mcif: one beat per cycle
    assert rp == wp == p
    # the parameters are valid for the DMAs (their constructors check them)
    rd, wr = ReadDma(**read_dma_params(cfg)), WriteDma(**write_dma_params(cfg))
    assert rd.max_burst == wr.max_burst == cfg.primary_memif_max_burst
    assert rd.lanes == cfg.primary_memif_width // 8 // cfg.atom_bytes


def test_erdma_only_with_ew():
    """SDP's ERDMA is an 8th read client (ARID 7) on configurations with the EW sub-unit; the
    others keep NVIDIA's 7 clients and their indices (and MCIF its number of read ports)."""
    from hdl.config import NV_SMALL, NV_SMALL_EW
    from hdl.dma.clients import read_clients
    from hdl.mcif import Mcif
    assert read_clients(NV_SMALL) == READ_CLIENTS and len(READ_CLIENTS) == 7
    assert read_clients(NV_SMALL_EW) == READ_CLIENTS + ("sdp_erdma",)
    assert read_client("sdp_erdma") == 7
    assert Mcif(NV_SMALL).n_read == 7 and Mcif(NV_SMALL_EW).n_read == 8
    for name in PRESETS:
        cfg = get_config(name)
        assert Mcif(cfg).n_read == max(cfg.num_dma_read_clients, len(read_clients(cfg)))
