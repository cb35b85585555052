"""bench/kernels/sweep_issue39.py's pure parts: the variants it profiles exist, and ncu's raw page is read right."""

from bench.kernels import sweep_issue39 as sweep
from kernels.triton import cross_entropy, layer_norm, matmul


def test_every_profiled_variant_is_a_route_variant():
    """A renamed or dropped variant would fail the profile process (under ncu) after the whole bench had run."""
    for names, route in (
        (sweep.LAYER_NORM_PROFILED, layer_norm),
        (sweep.CROSS_ENTROPY_PROFILED, cross_entropy),
        (sweep.MATMUL_PROFILED, matmul),
    ):
        assert all(name is None or name in route.VARIANTS for name in names), route.__name__


def test_ncu_raw_page_units_are_scaled():
    text = (
        '==PROF== Connected\n"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum"\n'
        '"","","ns","Mbyte"\n"0","_chunk_moments","89664","268.5"\n'
    )
    (kernel,) = sweep.parse_ncu(text)
    assert kernel["kernel"] == "_chunk_moments"
    assert kernel["gpu__time_duration.sum"] == 89664e-9
    assert kernel["dram__bytes_read.sum"] == 268.5e6
    assert kernel["lts__t_bytes.sum"] is None  # not in this page: the basic metrics' retry
    assert "_chunk_moments" in sweep.ncu_lines([kernel])[1]
