"""``torch-nki calibrate``: a JSON of measured cases (our own kernels, written here) estimated
and compared, with per-case ratios, the geometric mean and the dominant constants; bad files
and cases are errors naming the case and field."""

from __future__ import annotations

import json
import math
import re
import textwrap
from pathlib import Path

import pytest

from torch_nki import calibrate, cli

KERNELS = textwrap.dedent(
    """
    import nki
    import nki.isa as nisa
    import nki.language as nl


    @nki.jit
    def copy_blocks(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for c in nl.affine_range(x.shape[1] // 512):
            t = nl.ndarray((x.shape[0], 512), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[:, c * 512 : c * 512 + 512])
            nisa.dma_copy(dst=out[:, c * 512 : c * 512 + 512], src=t)
        return out


    @nki.jit
    def scale(x, factor=2.0):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
        nl.store(out, value=t)
        return out
    """
)


def _write(tmp_path: Path, cases: list[dict[str, object]]) -> Path:
    (tmp_path / "kernels").mkdir(exist_ok=True)
    (tmp_path / "kernels" / "ours.py").write_text(KERNELS)
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"cases": cases}))
    return path


CASES: list[dict[str, object]] = [
    {
        "name": "copy",
        "source": "kernels/ours.py",
        "kernel": "copy_blocks",
        "inputs": [{"shape": [128, 2048], "dtype": "bfloat16"}],
        "target": "trn2",
        "measured_us": 10.0,
        "counters": {"hbm_read_bytes": 524288, "dma_transfer_count": 8},
    },
    {
        "source": "kernels/ours.py",
        "kernel": "scale",
        "inputs": [{"shape": [128, 4096], "dtype": "float32"}],
        "kwargs": {"factor": 3.0},
        "target": "trn1",
        "measured_us": 20.0,
    },
]


def test_reports_each_case_the_geometric_mean_and_the_dominant_constants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, CASES)
    out = tmp_path / "report.json"
    assert cli.main(["calibrate", str(path), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| copy | trn2 | 10.0 |" in text and "| scale | trn1 | 20.0 |" in text
    assert "geometric-mean ratio (estimate / measured) over 2 cases" in text
    doc = json.loads(out.read_text())
    ratios = []
    for case, want_measured in zip(doc["cases"], (10.0, 20.0), strict=True):
        assert case["measured_us"] == want_measured
        assert case["ratio"] == pytest.approx(case["estimate_us"] / want_measured)
        assert case["error_percent"] == pytest.approx(100 * (case["ratio"] - 1))
        shares = [s for _, s in case["dominant"]]
        assert shares == sorted(shares, reverse=True) and sum(shares) == pytest.approx(1.0)
        ratios.append(case["ratio"])
    assert doc["geomean_ratio"] == pytest.approx(math.sqrt(ratios[0] * ratios[1]))
    # The copy is all DMA: its critical path is transfers and their completion latency.
    names = {n for n, _ in doc["cases"][0]["dominant"]}
    assert names <= {"dma_min_transfer_ns", "dma_engine_bytes_per_ns", "dma_latency_ns"}, names
    # The scale's critical path includes its vector pass.
    assert "vector_ghz" in {n for n, _ in doc["cases"][1]["dominant"]}
    # Measured counters come back beside the estimate's.
    assert doc["cases"][0]["counters"]["hbm_read_bytes"] == [524288, 524288]
    assert doc["cases"][0]["counters"]["dma_transfer_count"] == [8, 8]


def test_the_api_matches_the_command(tmp_path: Path) -> None:
    report = calibrate.calibrate(_write(tmp_path, CASES))
    assert [r.case.name for r in report.results] == ["copy", "scale"]
    assert report.results[1].case.kwargs == {"factor": 3.0}
    assert report.geomean_ratio == pytest.approx(math.exp(sum(math.log(r.ratio) for r in report.results) / 2))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"measured_us": None}, re.escape("case 0 (copy): missing `measured_us`")),
        ({"measured_us": -1}, re.escape("case 0 (copy): `measured_us` must be positive, got -1.0")),
        (
            {"target": "trn9"},
            re.escape("case 0 (copy): `target` must be one of trn1, trn2, trn3, got 'trn9'"),
        ),
        ({"source": "nowhere.py"}, r"case 0 \(copy\): `source` .*nowhere.py is not a file"),
        ({"inputs": [{"shape": [0, 4], "dtype": "float32"}]}, r"inputs\[0\]: `shape` must be positive ints"),
        ({"inputs": [{"shape": [128, 512], "dtype": "float99"}]}, re.escape("unknown dtype 'float99'")),
        ({"kernel": "missing"}, re.escape("case 0 (copy): no kernel `missing`")),
    ],
)
def test_bad_cases_name_the_case_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, object], message: str
) -> None:
    case = dict(CASES[0])
    for key, value in change.items():
        if value is None:
            case.pop(key)
        else:
            case[key] = value
    path = _write(tmp_path, [case])
    assert cli.main(["calibrate", str(path)]) == 2
    out = capsys.readouterr().out
    assert out.startswith("torch-nki calibrate: ")
    assert re.search(message, out), out


def test_a_file_that_is_not_a_case_list(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(calibrate.CalibrationError, match="must be an object with a `cases` list"):
        calibrate.load_cases(bad)
    with pytest.raises(calibrate.CalibrationError, match="cannot read"):
        calibrate.load_cases(tmp_path / "none.json")
