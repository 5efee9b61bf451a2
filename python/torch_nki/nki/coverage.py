"""The coverage table (``docs/nki-coverage.md``, ``torch-nki coverage``): every name of the NKI
0.7 API as declared once in Rust (``nki_spec``) against what this frontend implements. The
instructions' status is their declaration's; a ``nki.language`` name counts as implemented
where ``torch_nki.nki.language`` defines it."""

from __future__ import annotations

from typing import Any

from torch_nki.nki import language
from torch_nki.nki._spec import SPEC

_STATUS = {
    "implemented": "implemented",
    "planned": "not yet",
    "not_applicable": "not applicable",
}

_IMPLEMENTED = set(SPEC["implemented_operators"]) | set(SPEC["implemented_activations"])

_NOTES = [
    "Random numbers (`rng`, `rand2`, `dropout`, `set_rng_seed`, `rand_set_state`, `rand_get_state`, "
    "`nl.rand`, `nl.random_seed`, `nl.dropout`): XORWOW per engine and compute lane, deterministic from "
    "the seed, in the program order of a sequential reading of the loops (seeding, default state and "
    "bits-to-float rule: docs/nki-frontend.md, Random numbers). Simulator tiles hold fp32 values, so "
    "`rng` into an int32/uint32 tile is a `SimulationError` (uint8/uint16 bits are exact) and "
    "`rand_get_state` writes each uint32 state word rounded to the nearest fp32 (exact below 2^24). "
    "The vector engine's pre-NeuronCore-v4 LFSR is not modelled: XORWOW on every target.",
    "`activate2`: both tensor-scalar stages and the function in fp32, rounded once to `dst`; `relu_param` is "
    "`nl.prelu`'s slope (`activation` applies `nl.prelu` with 0). Its reduction, as `activation`'s, is "
    "`reduce_cmd=reset_reduce` with `reduce_res`; the accumulator registers across instructions are not "
    "modelled (docs/nki-frontend.md).",
    "`nl.device_print`: the values are copied (`dma_copy`) into an extra output of the traced program and "
    "printed to stdout after the simulation, in program order (NKI's CPU simulation prints at once); "
    "`nl.shared_constant`: a read-only HBM tensor the program carries with its values. `nl.floor` / `ceil` / "
    "`trunc` / `fmod` / `mod` / `rms_norm` / `shared_identity_matrix` lower to instructions as "
    "`torch_nki/nki/_language_rest.py` documents (rounding through the int32 conversion, in fp32).",
    "MX (`quantize_mx`, `nc_matmul_mx`, the `_x4` dtypes): lane k of a packed element is byte k (fp8) or "
    "nibble k (fp4) of its little-endian word; a tile stores the element's bit pattern and only `dma_copy` "
    "(same dtype), `quantize_mx` and `nc_matmul_mx` take packed data. `quantize_mx` uses the docstring's "
    "scale 2^(floor(log2 amax) - (E_max - 1)) per 8 partitions x 4 values (2^-127 for zeros, NaN scale and "
    "values for a group with inf/NaN), written at row 32(g/4) + g%4; `nc_matmul_mx` sums exact products in "
    "f64, rounded once to fp32. At the torch boundary packed data is bytes: `nki.packed(uint8_array, dtype)` "
    "in, uint8 out (docs/nki-frontend.md, MX data).",
    "Registers and device loops (`register_alloc`, `register_move`, `register_load`, `register_store`, "
    "`nl.dynamic_range`, `nl.fori_loop`, `nl.while_loop`, `while reg:`): a register is an int32, empty "
    "until written (reading it then is a `SimulationError`); a device loop is traced once and simulated "
    "by iterating (bounds read when it starts, a `while` tested before each iteration; after 2^24 "
    "iterations a `SimulationError`), never in parallel; the cost model charges a loop whose trip count "
    "is a register one iteration (docs/nki-frontend.md, Registers and device loops). A register is "
    "also an access pattern's `scalar_offset=` (docs/nki-frontend.md, Runtime offsets).",
    "SPMD launch grids (`kernel[2]`, `kernel[2, 3]`, `nl.program_id`, `nl.num_programs`, `nl.program_ndim`): "
    "every instance is traced with its id as a Python int and simulated in program-id order over the "
    "shared HBM, each with its own SBUF/PSUM (a large launch whose instances are proven independent runs "
    "them at the same time, with the same bits); two instances touching one element of a "
    "shared tensor, one of them writing, between synchronisations is a validation error (`core-race`). "
    "Instances that meet at `core_barrier` / `sendrecv` run in lockstep between them (at most two, "
    "synchronising at the top level of their bodies). The cost model spreads instances round robin over "
    "the physical cores of the logical core (2 on Trn2/Trn3, LNC=2) (docs/nki-frontend.md, Launch grids).",
    "`dma_compute`: sources and `dst` in HBM or SBUF, summed in fp32 in row-major element order and "
    "rounded once to `dst`; `nl.add` and unit scales only, as the docs say (`dma-compute-op`, "
    "`dma-compute-scales`); the indirect read-modify-write forms (`vector_offset`) are not implemented.",
]
"""Simulator behaviour the table's rows cannot show (the coverage notes)."""

_SINCE = {"gen2": "v2+ (Trn1)", "gen3": "v3+ (Trn2)", "gen4": "v4+ (Trn3)"}


def _signature(params: list[dict[str, Any]]) -> str:
    return ", ".join(p["name"] for p in params if p["name"] != "name")


def _nl_status(name: str) -> str:
    value = language.__dict__.get(name)
    if value is None:
        return "not yet"
    if isinstance(value, language.Function):
        if value.name not in _IMPLEMENTED:
            return "not yet (the simulator does not implement it)"
        lowered = " / ".join(
            ("`tensor_tensor`, `tensor_scalar`" if k == "operator" else "`activation`") for k in value.kinds
        )
        return f"implemented (lowered to {lowered}; also as `op=`)"
    return "implemented"


def markdown() -> str:
    """The whole table, as Markdown."""
    instructions = SPEC["instructions"]
    done = sum(1 for i in instructions if i["status"] == "implemented")
    lines = [
        "# NKI 0.7 coverage",
        "",
        "Generated by `torch-nki coverage -o docs/nki-coverage.md` from the declarations in",
        "`nki-core/spec` (the NKI 0.7 API, declared once); a test keeps it fresh. Calling a name",
        "marked *not yet* raises `NotImplementedError` naming the call and its line; a keyword",
        "value the frontend does not implement does the same, naming the keyword.",
        "",
        f"## `nki.isa`: {done} of {len(instructions)} instructions",
        "",
        "| instruction | status | engines | NeuronCore | keywords |",
        "|---|---|---|---|---|",
    ]
    for i in instructions:
        engines = ", ".join(i["engines"]) or "-"
        since = _SINCE[i["targets"]["since"]]
        lines.append(
            f"| `{i['name']}` | {_STATUS[i['status']]} | {engines} | {since} | {_signature(i['params'])} |"
        )
    lines += ["", "## `nki.isa` enums (also `nki.isa.constants`)", "", "| enum | variants |", "|---|---|"]
    for e in SPEC["enums"]:
        lines.append(f"| `{e['name']}` | {', '.join(v['name'] for v in e['variants'])} |")
    functions = SPEC["functions"]
    have = sum(1 for f in functions if _nl_status(f["name"]).startswith("implemented"))
    lines += [
        "",
        f"## `nki.language`: {have} of {len(functions)} functions",
        "",
        "| function | category | status |",
        "|---|---|---|",
    ]
    for f in functions:
        lines.append(f"| `{f['name']}` | {f['category']} | {_nl_status(f['name'])} |")
    dtypes = SPEC["dtypes"]
    known = {d.nki_name for d in language.DTYPES}
    lines += [
        "",
        f"## dtypes: {sum(1 for d in dtypes if d['name'] in known)} of {len(dtypes)}",
        "",
        "| dtype | bits | torch | status |",
        "|---|---|---|---|",
    ]
    for d in dtypes:
        torch_name = d.get("torch") or "-"
        status = "implemented" if d["name"] in known else "not yet"
        lines.append(f"| `{d['name']}` | {d['bits']} | {torch_name} | {status} |")
    lines += ["", "## Notes", ""] + [f"- {note}" for note in _NOTES]
    return "\n".join(lines) + "\n"
