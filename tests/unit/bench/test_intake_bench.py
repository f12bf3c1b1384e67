"""bench.intake runs on a small history and small files (it had broken silently: its fake ledger lacked a field the
source reads), and its decode figure decodes every file it counts, in process and in a pool."""

import pytest

from bench.intake import main, measure, measure_decode


def test_the_history_figures_come_from_a_real_consumed_log(tmp_path):
    result = measure(consumed=100, files_per_step=4, steps=2, folder=tmp_path)
    assert result["consumed"] == 100 and result["log_bytes_per_file"] == 67
    assert (tmp_path / "consumed.log").stat().st_size == 67 * (100 + 1 + 2 * 4)


def test_the_decode_figure_decodes_every_file_both_ways():
    result = measure_decode(count=4, workers=2, tokens=8)
    assert result["decode_files"] == 4 and result["decode_workers"] == 2
    assert result["decode_serial_files_per_s"] > 0 and result["decode_pool_files_per_s"] > 0
    assert result["decode_parent_cpu_ms_per_file"] > 0


def test_a_pool_of_one_process_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--decode-workers", "1"])
    assert exited.value.code == 2
    assert "--decode-workers must be at least 2" in capsys.readouterr().err
