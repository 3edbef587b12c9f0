"""bench/bench_peers.py's own logic, without llama.cpp (the `peers` extra is never a test dependency): which
prefix lengths it accepts, and how one prefix row of the issue's JSON schema is put together from both sides."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_peers.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_peers_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sizes_must_leave_room_for_the_query():
    bench = load_bench()
    assert bench.parse_sizes("4096, 16384", 32768, 17) == [4096, 16384]
    assert bench.parse_sizes("32751", 32768, 17) == [32751]
    for bad in ("32752", "1", "4096,x", ""):
        with pytest.raises(SystemExit) as e:
            bench.parse_sizes(bad, 32768, 17)
        assert "--sizes" in str(e.value)


def test_schema_row_has_the_issue_keys_and_reads_every_restore_path():
    bench = load_bench()
    g = {"tokens": 4096, "graft_s": 0.2, "ram_graft_s": 0.15, "recompute_s": 10.0, "exact": True,
         "artifact_bytes": 41_000_000, "restore_s": 0.05, "ram_restore_s": 0.01, "query_s": 0.12,
         "floor_s": 0.03, "weights_s": 0.05}
    llama = {"restore_file_s": 1.0, "restore_ram_raw_s": 0.4, "restore_ram_wrapper_s": 0.5, "recompute_s": 16.0,
             "prefill_s": 15.9, "query_s": 0.1, "set_data_s": 0.3, "state_bytes": 614_000_000,
             "exact": {"ram_wrapper": True, "ram_raw": True, "file": False}}
    row = bench.schema_row(g, llama, stock=g)
    assert set(bench.ROW_KEYS) <= set(row)
    assert row["llama_restore_exact"] is False  # one path differing is enough
    assert row["llama_restore_s"] == 1.0 and row["llama_restore_ram_s"] == 0.4  # llama.cpp's own calls
    assert row["graft_over_llama_file"] == pytest.approx(0.2) and row["ram_graft_over_llama_ram"] == pytest.approx(0.375)
    assert row["galahad_stock"]["graft_s"] == 0.2
    llama["exact"] = dict.fromkeys(llama["exact"], True)
    assert bench.schema_row(g, llama)["llama_restore_exact"] is True
    assert "galahad_stock" not in bench.schema_row(g, llama)
