//! NKI Python generated from every registry kernel (and its backward) at its first sample's
//! signature on Trn2, held as snapshots; and every emitted `nki`/`nl`/`nisa` name and keyword is
//! in codegen's spelling table. A kernel launched on an SPMD grid is held as two snapshots: its
//! source (symbolic `nl.program_id`) and its unrolled program's (one `if nl.program_id(0) == k:`
//! block per instance), which `tests/python/test_nki_spmd.py` checks the frontend against.

use nki_core::codegen::{emit_nki, emitted};
use nki_core::{KernelDef, Signature};
use nki_kernels as _;
use nki_registry::Registry;
use nki_tests::{Samples, sample_signatures};

/// `(kernel, signature)` for every forward kernel's first sample and the backward it implies.
fn programs() -> Vec<(&'static KernelDef, Signature)> {
    sample_signatures(Samples::First)
}

#[test]
fn every_kernel_emits_nki_source() {
    let programs = programs();
    assert!(programs.len() >= Registry::global().unwrap().kernels().count());
    for (def, sig) in programs {
        let program = def.check(&sig).and_then(|c| c.trace()).unwrap();
        let source = emit_nki(&program);
        assert!(source.contains(&format!("def {}(", def.name)), "{source}");
        nki_tests::assert_snapshot!(def.name, source);
    }
}

/// `nisa.x(...)`, `nl.x`, `nki.x` names in `source`, and `kw=` keywords with the call they
/// belong to.
fn names_and_keywords(source: &str) -> (Vec<String>, Vec<(String, String)>) {
    let mut names = Vec::new();
    let mut keywords = Vec::new();
    for line in source.lines() {
        let code = line.split("  #").next().unwrap_or("");
        if code.trim_start().starts_with('"') || code.trim_start().starts_with("import ") {
            continue;
        }
        let bytes: Vec<char> = code.chars().collect();
        let mut i = 0;
        // The innermost open call, to attribute keywords.
        let mut calls: Vec<String> = Vec::new();
        while i < bytes.len() {
            let c = bytes[i];
            if c.is_alphabetic() || c == '_' || c == '.' {
                let start = i;
                while i < bytes.len()
                    && (bytes[i].is_alphanumeric() || bytes[i] == '_' || bytes[i] == '.')
                {
                    i += 1;
                }
                let word: String = bytes[start..i].iter().collect();
                let dotted = word.starts_with("nl.")
                    || word.starts_with("nisa.")
                    || word.starts_with("nki.");
                if dotted {
                    names.push(word.clone());
                }
                let called = i < bytes.len() && bytes[i] == '(';
                if called {
                    calls.push(if dotted {
                        word
                    } else {
                        word.rsplit('.').next().unwrap().to_string()
                    });
                    i += 1;
                    continue;
                }
                let is_kw = i < bytes.len() && bytes[i] == '=' && bytes.get(i + 1) != Some(&'=');
                if is_kw && let Some(call) = calls.last() {
                    keywords.push((call.clone(), word));
                }
                continue;
            }
            if c == ')' {
                calls.pop();
            }
            i += 1;
        }
    }
    (names, keywords)
}

/// Asserts every name and keyword `source` (generated for `kernel`) uses is in the spelling
/// table; returns the names.
fn check_spelling(kernel: &str, source: &str) -> Vec<String> {
    let (names, keywords) = names_and_keywords(source);
    let table = emitted();
    for n in &names {
        assert!(
            table.iter().any(|e| e.name == n.as_str()),
            "{kernel}: `{n}` is not in codegen's spelling table"
        );
    }
    for (call, kw) in keywords {
        let entry = table
            .iter()
            .find(|e| e.name == call.as_str())
            .unwrap_or_else(|| panic!("{kernel}: `{call}(...)` is not in the table"));
        assert!(
            entry.keywords.contains(&kw.as_str()),
            "{kernel}: `{call}` called with `{kw}=`, which the table does not list"
        );
    }
    names
}

#[test]
fn generated_code_uses_only_the_spelling_table() {
    let mut used = std::collections::BTreeSet::new();
    for (def, sig) in programs() {
        let source = emit_nki(&def.check(&sig).and_then(|c| c.trace()).unwrap());
        used.extend(check_spelling(def.name, &source));
    }
    // Every dotted table entry names a documentation page, and the library exercises the core.
    for e in emitted() {
        assert!(
            e.doc
                .starts_with("https://awsdocs-neuron.readthedocs-hosted.com/"),
            "{e:?}"
        );
    }
    for core in [
        "nki.jit",
        "nl.ndarray",
        "nisa.dma_copy",
        "nisa.nc_matmul",
        "nl.affine_range",
    ] {
        assert!(used.contains(core), "no library kernel emits {core}");
    }
}

/// `iota`, `range_select` (with and without a reduction) and the comparison operators, which no
/// registry kernel uses yet: their generated source is a snapshot and keeps to the table.
#[test]
fn iota_range_select_and_comparisons_emit_within_the_spelling_table() {
    use nki_core::lang::{InputSpec, trace};
    use nki_core::prelude::*;
    let input = |name: &str, shape: &[usize]| InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype: DType::F32,
    };
    let program = trace(
        "select_columns",
        Target::Trn2,
        &[input("x", &[128, 64]), input("idx", &[128, 1])],
        |h| {
            let (picked, hot) = (
                shared_hbm(&[128, 1], DType::F32),
                shared_hbm(&[128, 64], DType::F32),
            );
            let lo = sbuf([128, 1], DType::F32);
            dma_copy(&lo, &h[1]);
            let hi = sbuf([128, 1], DType::F32);
            tensor_scalar(&hi, &lo, BinOp::Add, 1.0);
            let cols = sbuf([128, 64], DType::I32);
            iota(&cols, 0, 0, 1);
            let one_hot = sbuf([128, 64], DType::F32);
            tensor_scalar(&one_hot, &cols, BinOp::Equal, &lo).then(BinOp::NotEqual, 0.0);
            tensor_tensor(&one_hot, &one_hot, &one_hot, BinOp::GreaterEqual);
            dma_copy(&hot, &one_hot);
            let x = sbuf([128, 64], DType::F32);
            dma_copy(&x, &h[0]);
            let res = sbuf([128, 1], DType::F32);
            range_select(
                x.region().slice(0, 128, 32, 32),
                x.region().slice(0, 128, 32, 32),
                BinOp::GreaterEqual,
                BinOp::Less,
                &lo,
                &hi,
                Some(res.region()),
                BinOp::Maximum,
                32.0,
                f32::NEG_INFINITY,
            );
            range_select(
                &x,
                &x,
                BinOp::Greater,
                BinOp::LessEqual,
                &lo,
                &hi,
                None,
                BinOp::Maximum,
                0.0,
                0.0,
            );
            dma_copy(&picked, &res);
            vec![picked, hot]
        },
    )
    .unwrap();
    nki_core::validate::validate(&program).unwrap();
    let source = emit_nki(&program);
    let names = check_spelling("select_columns", &source);
    for name in ["nisa.iota", "nisa.range_select", "nl.equal", "nl.not_equal"] {
        assert!(names.iter().any(|n| n == name), "{name}\n{source}");
    }
    nki_tests::assert_snapshot!("select_columns", source);
}

/// `scalar_tensor_tensor`, with a column and an immediate `operand0`, and with a free-dim
/// reduction (`reduce_op=`/`reduce_res=`, which no registry kernel uses yet): one call each,
/// keeping to the table.
#[test]
fn scalar_tensor_tensor_emits_within_the_spelling_table() {
    use nki_core::lang::{InputSpec, trace};
    use nki_core::prelude::*;
    let input = |name: &str, shape: &[usize]| InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype: DType::BF16,
    };
    let program = trace(
        "fused",
        Target::Trn2,
        &[input("x", &[128, 64]), input("y", &[128, 64])],
        |h| {
            let out = shared_hbm(&[128, 64], DType::BF16);
            let (x, y) = (sbuf([128, 64], DType::BF16), sbuf([128, 64], DType::BF16));
            dma_copy(&x, &h[0]);
            dma_copy(&y, &h[1]);
            let mean = sbuf([128, 1], DType::F32);
            tensor_reduce(&mean, BinOp::Add, &x, 1, false);
            scalar_tensor_tensor(&x, &x, BinOp::Subtract, &mean, BinOp::Multiply, &y);
            scalar_tensor_tensor(
                x.region().slice(0, 128, 0, 32),
                y.region().slice(0, 128, 32, 32),
                BinOp::Multiply,
                0.5,
                BinOp::Add,
                x.region().slice(0, 128, 32, 32),
            );
            let smallest = sbuf([128, 2], DType::F32);
            scalar_tensor_tensor_reduce(
                &x,
                &x,
                BinOp::Multiply,
                &mean,
                BinOp::Add,
                &y,
                BinOp::Minimum,
                smallest.region().slice(0, 128, 1, 1),
            );
            tensor_scalar(
                &x,
                &x,
                BinOp::Subtract,
                smallest.region().slice(0, 128, 1, 1),
            );
            dma_copy(&out, &x);
            vec![out]
        },
    )
    .unwrap();
    nki_core::validate::validate(&program).unwrap();
    let source = emit_nki(&program);
    let names = check_spelling("fused", &source);
    assert!(
        names.iter().any(|n| n == "nisa.scalar_tensor_tensor"),
        "{source}"
    );
    for call in [
        "nisa.scalar_tensor_tensor(dst=t0, data=t0, op0=nl.subtract, operand0=t2, \
         op1=nl.multiply, operand1=t1)",
        "nisa.scalar_tensor_tensor(dst=t0[0:128, 0:32], data=t1[0:128, 32:64], op0=nl.multiply, \
         operand0=0.5, op1=nl.add, operand1=t0[0:128, 32:64])",
        "nisa.scalar_tensor_tensor(dst=t0, data=t0, op0=nl.multiply, operand0=t2, op1=nl.add, \
         operand1=t1, reduce_op=nl.minimum, reduce_res=t3[0:128, 1:2])",
    ] {
        assert!(source.contains(call), "{call}\n{source}");
    }
}

#[test]
fn the_keyword_scanner_attributes_keywords_to_their_call() {
    let (names, kws) = names_and_keywords(
        "    nisa.dma_copy(dst=t0[0:1, 0:2], src=x.ap(pattern=[[1, 2]], offset=i0 + 3))  # f.rs:1\n",
    );
    assert_eq!(names, ["nisa.dma_copy"]);
    assert_eq!(
        kws,
        [
            ("nisa.dma_copy".to_string(), "dst".to_string()),
            ("nisa.dma_copy".to_string(), "src".to_string()),
            ("ap".to_string(), "pattern".to_string()),
            ("ap".to_string(), "offset".to_string()),
        ]
    );
}

/// A Rust kernel launched on the grid `[2, 3]`: instance `(i, j)` doubles block `(i, j)` of `x`
/// (`[24, 5]`, six blocks of four rows) in two tiles of two rows (`program_id` in the offsets,
/// inside a loop).
fn grid_program() -> nki_core::ir::Program {
    use nki_core::lang::{InputSpec, trace_grid};
    use nki_core::prelude::*;
    let inputs = [InputSpec {
        name: "x".into(),
        shape: vec![24, 5],
        dtype: DType::F32,
    }];
    trace_grid("grid_blocks", Target::Trn2, &[2, 3], &inputs, |ins| {
        let out = shared_hbm(&[24, 5], DType::F32);
        let block = program_id(0) * 12usize + program_id(1) * 4usize;
        affine_range(2, |k| {
            let start = block.clone() + k * 2usize;
            let t = sbuf([2, 5], DType::F32);
            dma_copy(&t, ins[0].rows(start.clone(), 2));
            tensor_scalar(&t, &t, BinOp::Multiply, 2.0);
            dma_copy(out.rows(start, 2), &t);
        });
        vec![out]
    })
    .unwrap()
}

#[test]
fn a_grid_kernel_emits_its_grid_and_program_ids() {
    let program = grid_program();
    nki_core::validate::validate(&program).unwrap();
    let source = emit_nki(&program);
    assert!(source.contains("LAUNCH_GRID = (2, 3)"), "{source}");
    check_spelling("grid_blocks", &source);
    nki_tests::assert_snapshot!("grid_blocks", source);
    let unrolled = emit_nki(&nki_core::ir::unroll(&program));
    check_spelling("grid_blocks", &unrolled);
    nki_tests::assert_snapshot!("grid_blocks_unrolled", unrolled);
}
